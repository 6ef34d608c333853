//! Checks the house rules anyone can run with `cargo test --test house` (and `make lint`
//! does): no file of `src/`, `packager/`, `testkit/` or `hack/` over 600 lines, and no circle
//! of imports between two files, nor between two folders, of the operator crate (`src/`). The
//! rules are the test kit's (`testkit::house`).

use testkit::house::{Imports, MAX_LINES, long_files};
use testkit::repository;

#[test]
fn no_file_is_over_the_line_limit() {
    let long = long_files(repository::root(), &["src", "packager", "testkit", "hack"]);
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split each by what it does): {long:#?}"
    );
}

#[test]
fn no_two_files_of_the_operator_import_each_other() {
    let imports = Imports::of_crate(&repository::root().join("src"), "memcached_operator");
    assert!(imports.edges.len() > 100, "the operator's files are read");
    let circles: Vec<Vec<String>> = imports
        .file_circles()
        .iter()
        .map(|circle| imports.imports_within(circle))
        .collect();
    assert!(
        circles.is_empty(),
        "files that import each other, directly or through one another: {circles:#?}"
    );
}

#[test]
fn no_two_folders_of_the_operator_import_each_other() {
    let imports = Imports::of_crate(&repository::root().join("src"), "memcached_operator");
    let circles: Vec<Vec<String>> = imports
        .folder_circles()
        .iter()
        .map(|circle| imports.folder_imports_within(circle))
        .collect();
    assert!(
        circles.is_empty(),
        "folders whose files import each other's: {circles:#?}"
    );
}
