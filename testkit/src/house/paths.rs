//! Reads which files of a crate a Rust file imports, lexically: comments, strings and
//! characters blanked, then `use` trees, paths written out, and paths through declared or
//! imported modules, each resolved to the deepest module file it reaches.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module of the crate: its path (`["controller", "cache"]`) and its file.
pub type Modules = BTreeMap<Vec<String>, PathBuf>;

pub fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// The modules a file declares with `mod name;` (or `pub mod`), out of line.
pub fn declared_modules(code: &str) -> BTreeSet<String> {
    let code = blank(code);
    let mut names = BTreeSet::new();
    let tokens = tokens(&code);
    for (i, token) in tokens.iter().enumerate() {
        if token == "mod"
            && let (Some(name), Some(end)) = (tokens.get(i + 1), tokens.get(i + 2))
            && end == ";"
        {
            names.insert(name.clone());
        }
    }
    names
}

/// Replaces the text of comments, strings and character literals with spaces, keeping the
/// code's shape.
pub fn blank(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if chars[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    _ => j += 1,
                }
            }
            for c in &chars[i..j.min(chars.len())] {
                out.push(if *c == '\n' { '\n' } else { ' ' });
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(if chars[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{..}'), not a lifetime ('a without a close).
            let close = if next == Some('\\') {
                (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
            } else {
                (chars.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match close {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The code as tokens: identifiers (with `r#`), `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".into());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// The files a file (`file`, the module `module`) imports, resolved in `modules` (and, for the
/// binary, in `library` under `crate_name`).
pub fn imports_of(
    code: &str,
    module: &[String],
    modules: &Modules,
    library: Option<&Modules>,
    crate_name: &str,
) -> BTreeSet<PathBuf> {
    let tokens = tokens(code);
    let mut aliases: BTreeMap<String, (bool, Vec<String>)> = BTreeMap::new();
    for name in declared_modules(code) {
        let mut path = module.to_vec();
        path.push(name.clone());
        aliases.insert(name, (false, path));
    }
    let mut targets = BTreeSet::new();
    let resolve = |in_library: bool, path: &[String], targets: &mut BTreeSet<PathBuf>| {
        let table = if in_library {
            library.unwrap_or(modules)
        } else {
            modules
        };
        for len in (0..=path.len()).rev() {
            if let Some(found) = table.get(&path[..len]) {
                if len > 0 || path.is_empty() {
                    targets.insert(found.clone());
                }
                return len > 0 && len == path.len();
            }
        }
        false
    };
    // The absolute form of a path written in the module `here` (the file's module and the
    // inline modules around the path), or None for a path outside the crate.
    let absolute =
        |segments: &[String], here: &[String], aliases: &BTreeMap<String, (bool, Vec<String>)>| {
            let first = segments.first()?;
            let rest = &segments[1..];
            let (in_library, mut base) = match first.as_str() {
                "crate" => (false, Vec::new()),
                "self" => (false, here.to_vec()),
                "super" => {
                    let mut base = here.to_vec();
                    base.pop();
                    let mut rest_start = 0;
                    while rest.get(rest_start).is_some_and(|s| s == "super") {
                        base.pop();
                        rest_start += 1;
                    }
                    base.extend(rest[rest_start..].iter().cloned());
                    return Some((false, base));
                }
                name if name == crate_name && library.is_some() => (true, Vec::new()),
                name => aliases.get(name).cloned()?,
            };
            base.extend(rest.iter().cloned());
            Some((in_library, base))
        };
    // Inline modules (`mod tests { ... }`) open around the current token, with the brace depth
    // each opened at.
    let mut here: Vec<String> = module.to_vec();
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "mod"
                if tokens.get(i + 2).is_some_and(|t| t == "{")
                    && (i == 0 || tokens[i - 1] != "::") =>
            {
                here.push(tokens[i + 1].clone());
                inline.push(depth);
                depth += 1;
                i += 3;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                    here.pop();
                }
            }
            _ => {}
        }
        if tokens[i] == "use" && (i == 0 || tokens[i - 1] != "::") {
            let end = (i..tokens.len())
                .find(|&k| tokens[k] == ";")
                .unwrap_or(tokens.len());
            for (path, local) in use_paths(&tokens[i + 1..end]) {
                if let Some((in_library, absolute)) = absolute(&path, &here, &aliases) {
                    let whole = resolve(in_library, &absolute, &mut targets);
                    if whole && let Some(local) = local {
                        aliases.insert(local, (in_library, absolute));
                    }
                }
            }
            i = end + 1;
            continue;
        }
        let starts_path = (tokens[i] == "crate"
            || tokens[i] == "self"
            || tokens[i] == "super"
            || aliases.contains_key(&tokens[i])
            || (tokens[i] == crate_name && library.is_some()))
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts_path {
            let mut path = vec![tokens[i].clone()];
            let mut k = i + 1;
            while tokens.get(k).is_some_and(|t| t == "::")
                && tokens
                    .get(k + 1)
                    .is_some_and(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                path.push(tokens[k + 1].clone());
                k += 2;
            }
            if let Some((in_library, absolute)) = absolute(&path, &here, &aliases) {
                resolve(in_library, &absolute, &mut targets);
            }
            i = k;
            continue;
        }
        i += 1;
    }
    targets
}

/// The paths of a `use` tree (its tokens between `use` and `;`), each with the local name it
/// brings in (`None` for a glob or `_`).
fn use_paths(tokens: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    let mut paths = Vec::new();
    let mut position = 0;
    use_tree(tokens, &mut position, &[], &mut paths);
    paths
}

fn use_tree(
    tokens: &[String],
    position: &mut usize,
    prefix: &[String],
    paths: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    while *position < tokens.len() {
        let token = tokens[*position].as_str();
        match token {
            "::" => *position += 1,
            "{" => {
                *position += 1;
                loop {
                    use_tree(tokens, position, &path, paths);
                    match tokens.get(*position).map(String::as_str) {
                        Some(",") => *position += 1,
                        Some("}") => {
                            *position += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(*position).map(String::as_str) == Some("}") {
                        *position += 1;
                        break;
                    }
                }
                return;
            }
            "," | "}" => break,
            "*" => {
                *position += 1;
                paths.push((path.clone(), None));
                return;
            }
            "as" => {
                let local = tokens.get(*position + 1).cloned();
                *position += 2;
                paths.push((path.clone(), local.filter(|l| l != "_")));
                return;
            }
            "self"
                if !path.is_empty()
                    && tokens.get(*position - 1).map(String::as_str) == Some("::") =>
            {
                *position += 1;
                let local = path.last().cloned();
                if tokens.get(*position).map(String::as_str) == Some("as") {
                    continue;
                }
                paths.push((path.clone(), local));
                return;
            }
            _ => {
                path.push(token.to_string());
                *position += 1;
            }
        }
    }
    if path.len() > prefix.len() {
        let local = path.last().cloned();
        paths.push((path, local));
    }
}
