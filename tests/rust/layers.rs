//! The engine's floor plan, checked: each layer imports only the layers below it, and no
//! files import each other in a circle.
//!
//! ```text
//! error, clock, notify -> format -> storage -> index -> catalog -> reader / writer
//!     -> consumers / retention / recovery -> config, queue -> python (and lib.rs)
//! ```
//!
//! The test reads `rust/**/*.rs` (outside `#[cfg(test)]` modules), takes every
//! `crate::...` and `super::...` path (in `use` lines, grouped ones included, and inline),
//! resolves it to the file that defines the module, and checks the edge against
//! [`LAYERS`]. A path through `crate::` itself (`crate::Error`) goes through `lib.rs`, the
//! top: engine code names the module that defines the item (`crate::error::Error`).
//! docs/DESIGN.md opens with the same diagram.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers from the bottom up: a file belongs to the first entry whose prefix its path
/// (relative to `rust/`) starts with. Files in one layer may import each other, as long as
/// they form no circle.
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &["error.rs", "clock.rs", "notify.rs"]),
    ("format", &["format/"]),
    ("storage", &["storage/"]),
    ("index", &["index/"]),
    ("catalog", &["catalog/"]),
    ("reader / writer", &["reader/", "writer/"]),
    (
        "consumers / retention / recovery",
        &["consumers/", "retention.rs", "recovery.rs", "compact.rs"],
    ),
    ("queue", &["config.rs", "queue/"]),
    ("python", &["python/", "lib.rs"]),
];

fn layer_of(file: &str) -> usize {
    LAYERS
        .iter()
        .position(|(_, prefixes)| prefixes.iter().any(|p| file.starts_with(p)))
        .unwrap_or_else(|| panic!("rust/{file} is in no layer: add it to LAYERS"))
}

/// Module path (`["reader", "tailer"]`) -> file (`reader/tailer.rs`), for every file.
fn modules(root: &Path) -> BTreeMap<Vec<String>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let mut segs: Vec<String> = rel[..rel.len() - 3]
                .split('/')
                .map(str::to_string)
                .collect();
            if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
                segs.pop();
            }
            out.insert(segs, rel);
        }
    }
    out
}

/// The source without comments, string literals and `#[cfg(test)]` modules.
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let end = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            i = end;
        } else if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            // Raw strings (r"..", r#".."#) hold no quotes we care about here.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    // Drop `#[cfg(test)] mod name { ... }` blocks: tests may use any layer.
    while let Some(at) = out.find("#[cfg(test)]") {
        let rest = &out[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        if !trimmed.starts_with("mod ") {
            out.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        }
        let open = at + "#[cfg(test)]".len() + (rest.len() - trimmed.len());
        let Some(brace) = out[open..].find(['{', ';']).map(|p| open + p) else {
            break;
        };
        let mut end = brace + 1;
        if out.as_bytes()[brace] == b'{' {
            let mut depth = 1;
            for (k, ch) in out[brace + 1..].char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = brace + 1 + k + 1;
                    break;
                }
            }
        }
        out.replace_range(at..end, "");
    }
    out
}

/// Expands a `use` tree (`crate::a::{b, c::{d, e}}`) into its paths.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, ch) in tree.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[start..]);
    for item in items {
        let item: String = item.split_whitespace().collect::<Vec<_>>().join(" ");
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let join = |p: &str| {
            if prefix.is_empty() {
                p.to_string()
            } else {
                format!("{prefix}::{p}")
            }
        };
        if let Some(open) = item.find('{') {
            let head = item[..open].trim_end_matches("::").trim();
            let inner = &item[open + 1..item.rfind('}').unwrap()];
            let p = if head.is_empty() {
                prefix.to_string()
            } else {
                join(head)
            };
            expand(&p, inner, out);
        } else {
            let path = item.split(" as ").next().unwrap().trim();
            out.push(join(path));
        }
    }
}

/// Every `crate::`/`super::` path in `code`, whole (`crate::a::b::C`), and every path into
/// a child module declared in it (`mod file;` ... `file::IndexFile`), as `self::file::..`.
fn paths(code: &str) -> Vec<String> {
    let children: Vec<String> = code
        .split(';')
        .filter_map(|stmt| {
            let words: Vec<&str> = stmt.split_whitespace().collect();
            match words.as_slice() {
                [.., "mod", name] => Some(name.to_string()),
                _ => None,
            }
        })
        .collect();
    let mut out = Vec::new();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    // `use` statements, grouped ones expanded.
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + 4..];
        rest = after;
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        if let Some(end) = after.find(';') {
            expand("", &after[..end], &mut out);
        }
    }
    // Inline paths: `crate::format::data_file::first_message_ts(..)`.
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root).map(|p| from + p) {
            from = at + root.len();
            if code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
            {
                continue;
            }
            let len = code[at..]
                .find(|c: char| !(is_ident(c) || c == ':'))
                .unwrap_or(code.len() - at);
            if code[at + len..].starts_with('{') {
                continue; // a grouped `use`, expanded above
            }
            out.push(code[at..at + len].trim_end_matches(':').to_string());
        }
    }
    // Paths into child modules, in `use` lines and inline.
    for child in &children {
        let root = format!("{child}::");
        let mut from = 0;
        while let Some(at) = code[from..].find(&root).map(|p| from + p) {
            from = at + root.len();
            if code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
            {
                continue;
            }
            out.push(format!("self::{child}"));
        }
    }
    out.iter_mut().for_each(|p| {
        if let Some(child) = children.iter().find(|c| p.starts_with(&format!("{c}::"))) {
            *p = format!("self::{child}");
        }
    });
    out.retain(|p| {
        p.starts_with("crate::")
            || p == "crate"
            || p.starts_with("super::")
            || p.starts_with("self::")
    });
    out
}

/// The file a path leads into: the longest prefix of it that is a module.
fn resolve(mods: &BTreeMap<Vec<String>, String>, here: &[String], path: &str) -> Option<String> {
    let mut segs: Vec<String> = Vec::new();
    let mut parts = path.split("::").filter(|s| !s.is_empty()).peekable();
    match parts.peek() {
        Some(&"crate") => {
            parts.next();
        }
        _ => segs.extend(here.iter().cloned()),
    }
    for p in parts {
        match p {
            "super" => {
                segs.pop();
            }
            "self" => {}
            _ => segs.push(p.to_string()),
        }
    }
    (0..=segs.len())
        .rev()
        .find_map(|n| mods.get(&segs[..n]).cloned())
}

/// Import edges between files, `from -> {to}` (a file's own module excluded).
fn edges(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(root);
    let mut out = BTreeMap::new();
    for (segs, file) in &mods {
        let code = code_of(&std::fs::read_to_string(root.join(file)).unwrap());
        let to: BTreeSet<String> = paths(&code)
            .iter()
            .filter_map(|p| resolve(&mods, segs, p))
            .filter(|t| t != file)
            .collect();
        out.insert(file.clone(), to);
    }
    out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rust")
}

/// Module `a` is inside module `b`: a child using its parent's items is how Rust modules
/// work, not a circle (the parent's use of the child still counts).
fn inside(a: &str, b: &str) -> bool {
    let dir = |f: &str| {
        f.trim_end_matches(".rs")
            .trim_end_matches("/mod")
            .to_string()
    };
    let (a, b) = (dir(a), dir(b));
    b == "lib" || a.starts_with(&format!("{b}/"))
}

#[test]
fn no_layer_imports_a_layer_above_it() {
    let mut wrong = Vec::new();
    let edges = edges(&root());
    for (from, tos) in edges {
        for to in tos {
            if layer_of(&to) > layer_of(&from) {
                wrong.push(format!(
                    "rust/{from} ({}) imports rust/{to} ({})",
                    LAYERS[layer_of(&from)].0,
                    LAYERS[layer_of(&to)].0
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a lower layer imports a higher one:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let edges = edges(&root());
    // Tarjan's strongly connected components, iteratively small enough to recurse.
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        circles: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for w in &s.edges[v] {
            if inside(v, w) {
                continue;
            }
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let lw = s.low[w.as_str()];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w.as_str()) {
                let iw = s.index[w.as_str()];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.circles.push(comp);
            }
        }
    }
    let mut s = State {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        circles: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    assert!(
        s.circles.is_empty(),
        "files that import each other in a circle: {:?}",
        s.circles
    );
}

#[test]
fn the_checker_sees_every_kind_of_import() {
    // Guard the parser itself: each form below must yield its edge.
    let code = code_of(
        "use crate::a::{b::{C, D}, e};\n\
         // use crate::commented::Out;\n\
         fn f() { crate::x::y(); let s = \"crate::in_string\"; }\n\
         use super::sibling::Z;\n\
         mod child;\n fn g() { child::h(); }\n\
         #[cfg(test)]\nmod tests { use crate::test_only::T; }\n",
    );
    let got: BTreeSet<String> = paths(&code).into_iter().collect();
    let want: BTreeSet<String> = [
        "crate::a::b::C",
        "crate::a::b::D",
        "crate::a::e",
        "crate::x::y",
        "super::sibling::Z",
        "self::child",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
}

/// Layers whose files may not import each other although they share a level: the reader
/// and the writer are peers (each reaches the data files through the catalog below them;
/// what one needs of the other, the queue above both passes in).
const PEERS: &[(&str, &str)] = &[("reader/", "writer/")];

#[test]
fn the_reader_and_the_writer_are_peers() {
    let mut wrong = Vec::new();
    for (from, tos) in edges(&root()) {
        for to in tos {
            for (a, b) in PEERS {
                let crosses = (from.starts_with(a) && to.starts_with(b))
                    || (from.starts_with(b) && to.starts_with(a));
                if crosses {
                    wrong.push(format!("rust/{from} imports rust/{to}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "peers import each other:\n  {}",
        wrong.join("\n  ")
    );
}
