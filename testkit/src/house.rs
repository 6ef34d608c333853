//! Checks the shape of the repository's code: no file longer than [`MAX_LINES`] in the folders
//! the rule covers, and no circle of imports between files, nor between folders, of the
//! operator crate (`src/`).
//!
//! A file imports another when it names an item of it: a `use` of a path into it (`crate::`,
//! `super::`, `self::`, or the crate's name from the binary), a path written out in the code,
//! or a path through a module it declared (`mod x;` then `x::f()`) or imported (`use
//! super::desired;` then `desired::plan()`). A path is resolved to the deepest module file it
//! reaches, so naming `crate::controller::cache::compact::hash64` imports
//! `controller/cache/compact.rs`, not the files above it. Declaring a module (`mod x;`) is not
//! an import. A folder is its files and its subfolders'; one folder imports another that neither
//! holds nor is held by it when a file of the one imports a file of the other (so
//! `controller/desired` and `controller/cache` may not import each other, while `controller`
//! may import `controller/cache`, which it holds). The parsing is lexical (comments, strings
//! and characters are blanked first); it knows Rust's paths, not its macros.

mod paths;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use self::paths::{Modules, blank, declared_modules, imports_of, module_path};
/// The longest a file may be, in lines.
pub const MAX_LINES: usize = 600;

/// Files the length rule leaves out: lock files and checksums that tools write.
const GENERATED: [&str; 2] = ["go.sum", "Cargo.lock"];

/// The files under `folders` (relative to `root`) longer than [`MAX_LINES`], with their lengths.
pub fn long_files(root: &Path, folders: &[&str]) -> Vec<(PathBuf, usize)> {
    let mut long = Vec::new();
    for folder in folders {
        for file in files_under(&root.join(folder), &|_| true) {
            if GENERATED.iter().any(|name| file.ends_with(name)) {
                continue;
            }
            let Ok(bytes) = std::fs::read(&file) else {
                continue;
            };
            let lines = bytes.iter().filter(|b| **b == b'\n').count();
            if lines > MAX_LINES {
                let relative = file.strip_prefix(root).unwrap_or(&file).to_path_buf();
                long.push((relative, lines));
            }
        }
    }
    long.sort();
    long
}

/// Every file under `dir`, recursively, that `keep` accepts, in order.
fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(files_under(&path, keep));
        } else if keep(&path) {
            found.push(path);
        }
    }
    found
}

/// The import graph of a crate's files: each file (relative to the crate's `src/`) and the
/// files it imports.
#[derive(Debug, Default)]
pub struct Imports {
    /// File → the files it imports.
    pub edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Imports {
    /// Reads every `.rs` file under `src` of the crate `crate_name` (`lib.rs` its root;
    /// `main.rs` and the modules it declares the binary's, which imports the library by name).
    pub fn of_crate(src: &Path, crate_name: &str) -> Imports {
        let files = files_under(src, &|p| p.extension().is_some_and(|e| e == "rs"));
        let mut library = Modules::new();
        let mut binary = Modules::new();
        let binary_modules = declared_modules(&read(&src.join("main.rs")));
        for file in &files {
            let relative = file.strip_prefix(src).unwrap_or(file).to_path_buf();
            let module = module_path(&relative);
            let in_binary = relative == Path::new("main.rs")
                || module.len() == 1 && binary_modules.contains(&module[0]);
            if in_binary {
                let module = if relative == Path::new("main.rs") {
                    Vec::new()
                } else {
                    module
                };
                binary.insert(module, relative);
            } else if relative != Path::new("main.rs") {
                library.insert(module, relative);
            }
        }
        let mut imports = Imports::default();
        for (modules, other) in [(&library, None), (&binary, Some(&library))] {
            for (module, file) in modules {
                let code = blank(&read(&src.join(file)));
                let targets = imports_of(&code, module, modules, other, crate_name);
                imports
                    .edges
                    .entry(file.clone())
                    .or_default()
                    .extend(targets.into_iter().filter(|t| t != file));
            }
        }
        imports
    }

    /// The circles between files: each a set of files that import one another, directly or
    /// through each other.
    pub fn file_circles(&self) -> Vec<Vec<PathBuf>> {
        circles(&self.edges)
    }

    /// The imports between the files of `circle`, to say how it closes.
    pub fn imports_within(&self, circle: &[PathBuf]) -> Vec<String> {
        let mut said = Vec::new();
        for from in circle {
            for to in self.edges.get(from).into_iter().flatten() {
                if circle.contains(to) {
                    said.push(format!("{} -> {}", from.display(), to.display()));
                }
            }
        }
        said
    }

    /// The imports that make the folders of `circle` import one another.
    pub fn folder_imports_within(&self, circle: &[PathBuf]) -> Vec<String> {
        let mut said = Vec::new();
        for (from, targets) in &self.edges {
            for to in targets {
                let crossing = folders_of(from).iter().any(|a| {
                    folders_of(to)
                        .iter()
                        .any(|b| !nested(a, b) && circle.contains(a) && circle.contains(b))
                });
                if crossing {
                    said.push(format!("{} -> {}", from.display(), to.display()));
                }
            }
        }
        said
    }

    /// The circles between folders. A folder is its files and its subfolders' (the crate's
    /// root folder, which holds every other, is none); one imports another that does not hold
    /// it, nor is held by it, when a file of the one imports a file of the other.
    pub fn folder_circles(&self) -> Vec<Vec<PathBuf>> {
        let mut folders: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (file, targets) in &self.edges {
            for target in targets {
                for from in folders_of(file) {
                    for to in folders_of(target) {
                        if !nested(&from, &to) {
                            folders.entry(from.clone()).or_default().insert(to);
                        }
                    }
                }
            }
        }
        circles(&folders)
    }
}

/// The folders a file is in (its own and those above it, but the crate's root).
fn folders_of(file: &Path) -> Vec<PathBuf> {
    file.ancestors()
        .skip(1)
        .filter(|folder| !folder.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .collect()
}

/// Whether one of two folders holds the other (or they are the same).
fn nested(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The module path of a file relative to `src/`: `a/b.rs` and `a/b/mod.rs` are `a::b`;
/// `lib.rs` is the root.
/// The strongly connected sets of more than one node in `graph` (Tarjan's algorithm), each
/// sorted, in order.
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a PathBuf) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut set = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    set.push(top.clone());
                    if top == node {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found.sort();
    walk.found
}

#[cfg(test)]
mod tests;
