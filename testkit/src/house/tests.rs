//! The import reader and the circles, on small made-up crates.

use super::*;

fn modules(files: &[&str]) -> Modules {
    files
        .iter()
        .map(|f| (module_path(Path::new(f)), PathBuf::from(f)))
        .collect()
}

fn imports(code: &str, file: &str, files: &[&str]) -> Vec<String> {
    let table = modules(files);
    let module = module_path(Path::new(file));
    imports_of(&blank(code), &module, &table, None, "memcached_operator")
        .into_iter()
        .map(|p| p.display().to_string())
        .filter(|p| p != file)
        .collect()
}

const FILES: [&str; 6] = [
    "lib.rs",
    "controller/mod.rs",
    "controller/cache/mod.rs",
    "controller/cache/compact.rs",
    "controller/desired/mod.rs",
    "controller/report.rs",
];

#[test]
fn a_path_imports_the_deepest_module_file_it_reaches() {
    let code = "use crate::controller::cache::compact::{hash64, Marks};\n\
                use super::desired;\n\
                fn f() { desired::plan(); }";
    assert_eq!(
        imports(code, "controller/report.rs", &FILES),
        ["controller/cache/compact.rs", "controller/desired/mod.rs"]
    );
}

#[test]
fn declared_modules_count_only_when_named() {
    let code = "pub mod cache;\nmod desired;\nfn f() { cache::compact::hash64(1); }";
    assert_eq!(
        imports(code, "controller/mod.rs", &FILES),
        ["controller/cache/compact.rs"]
    );
}

#[test]
fn super_in_an_inline_module_is_the_files_own_module() {
    let code = "fn f() {}\nmod tests {\n    use super::*;\n    fn g() { super::f(); }\n}\n\
                fn h() { super::desired::plan(); }";
    assert_eq!(
        imports(code, "controller/report.rs", &FILES),
        ["controller/desired/mod.rs"]
    );
}

#[test]
fn comments_and_strings_import_nothing() {
    let code = "// use crate::controller::desired;\n\
                /* crate::controller::cache::compact */\n\
                const A: &str = \"crate::controller::report\";\n\
                const B: char = '\"'; fn f<'a>(x: &'a str) {}";
    assert!(imports(code, "controller/mod.rs", &FILES).is_empty());
}

#[test]
fn circles_are_found_between_files_and_between_folders() {
    let mut imports = Imports::default();
    let edge = |imports: &mut Imports, from: &str, to: &str| {
        imports
            .edges
            .entry(PathBuf::from(from))
            .or_default()
            .insert(PathBuf::from(to));
    };
    edge(&mut imports, "a/x.rs", "a/y.rs");
    edge(&mut imports, "a/y.rs", "b/z.rs");
    edge(&mut imports, "b/z.rs", "b/w.rs");
    assert!(imports.file_circles().is_empty());
    assert!(imports.folder_circles().is_empty());
    edge(&mut imports, "b/w.rs", "a/x.rs");
    assert_eq!(imports.file_circles().len(), 1);
    assert_eq!(
        imports.folder_circles(),
        [vec![PathBuf::from("a"), PathBuf::from("b")]]
    );
}
