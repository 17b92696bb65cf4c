//! The workspace's import graph, read from the source: which file uses
//! which, and whether that graph has a cycle or an import that runs up
//! the layers `lease-core` documents.
//!
//! Every crate root (a `lib.rs`, a `main.rs`, a `src/bin/*.rs`) is read with
//! the modules its `mod` declarations bring in. A file uses another when
//! it names one of its items by a path: `use crate::a::b::C;`, an inline
//! `crate::a::b::f()`, `super::…`, `self::…`, or a child module's name
//! (`child::X` in `mod.rs`). A name re-exported by a module (`pub use`) is
//! followed to the file that defines it, so a crate root or a `mod.rs`
//! that only hands names on is no hub of false cycles. Comments, strings
//! and `#[cfg(test)]` items are not read: a test may use anything.
//!
//! `lease-core`'s layers are read from the table under `# Layers` in its
//! `lib.rs` (top row highest): the check holds that table to the code, and
//! a module the table does not place is reported too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One use of a file by another, with the names it was seen through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The file that imports.
    pub from: PathBuf,
    /// The file whose item it uses.
    pub to: PathBuf,
    /// The paths it was named by (as written, after `crate::`).
    pub names: BTreeSet<String>,
}

/// What the check found; empty lists mean the layers are true.
#[derive(Debug, Default)]
pub struct Findings {
    /// Files that import each other in a loop, each with the edges that tie it.
    pub cycles: Vec<Vec<Edge>>,
    /// Imports from a lower layer of `lease-core` to a higher one.
    pub upward: Vec<(String, String, Edge)>,
    /// `lease-core` modules the layer table does not place.
    pub unplaced: Vec<String>,
    /// Files read, over every crate.
    pub files: usize,
    /// Edges between distinct files.
    pub edges: usize,
}

impl Findings {
    /// Every finding, one a line, ready to print.
    pub fn describe(&self, root: &Path) -> Vec<String> {
        let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        let edge = |e: &Edge| {
            let names: Vec<&str> = e.names.iter().map(String::as_str).collect();
            format!("{} -> {} ({})", rel(&e.from), rel(&e.to), names.join(", "))
        };
        let mut out = Vec::new();
        for (i, cycle) in self.cycles.iter().enumerate() {
            out.push(format!("cycle {}:", i + 1));
            out.extend(cycle.iter().map(|e| format!("  {}", edge(e))));
        }
        for (low, high, e) in &self.upward {
            out.push(format!(
                "upward: layer {low} uses layer {high}: {}",
                edge(e)
            ));
        }
        for m in &self.unplaced {
            out.push(format!(
                "unplaced: lease-core module `{m}` is in no row of lib.rs's layer table"
            ));
        }
        out
    }
}

/// Checks every crate of the workspace at `root` (members read from its
/// `Cargo.toml`), and `lease-core`'s documented layers.
pub fn check_workspace(root: &Path) -> Findings {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("workspace Cargo.toml");
    let members = members(&manifest);
    let mut findings = Findings::default();
    for member in members {
        let src = root.join(&member).join("src");
        let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .filter(|p| p.exists())
            .collect();
        if let Ok(bins) = fs::read_dir(src.join("bin")) {
            let mut bins: Vec<PathBuf> = bins
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect();
            bins.sort();
            roots.extend(bins);
        }
        for crate_root in roots {
            let graph = Graph::read(&crate_root);
            let layers = (member == "lease-core" && crate_root.ends_with("lib.rs"))
                .then(|| layer_table(&fs::read_to_string(&crate_root).unwrap_or_default()));
            graph.judge(layers.as_ref(), &mut findings);
        }
    }
    findings
}

/// The `members = [...]` of a workspace manifest.
pub fn members(manifest: &str) -> Vec<String> {
    let start = manifest.find("members").expect("workspace members");
    let open = start + manifest[start..].find('[').expect("members list");
    let close = open + manifest[open..].find(']').expect("members list end");
    manifest[open + 1..close]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The layer table under `# Layers` in a crate root's docs: each row's
/// layer name and the modules it names in backticks, top row first.
pub fn layer_table(lib: &str) -> Vec<(String, Vec<String>)> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let line = line.trim_start_matches("//!").trim();
        if line.starts_with('#') {
            inside = line == "# Layers";
            continue;
        }
        if !inside || !line.starts_with('|') || line.starts_with("|---") {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || cells[1] == "layer" {
            continue;
        }
        // Every name in backticks, linked (``[`client`]``) or not.
        let modules = cells[2]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        rows.push((cells[1].to_string(), modules));
    }
    rows
}

/// One module of a crate: its file, its path from the crate root, its
/// children, and the names it re-exports.
#[derive(Debug)]
struct Module {
    file: PathBuf,
    path: Vec<String>,
    children: BTreeMap<String, usize>,
    /// `pub use` names: the name as seen here, and the absolute path it
    /// stands for (`*` for a glob).
    reexports: Vec<(String, Vec<String>)>,
    /// Every path the module's code names, absolute, with the text it
    /// was written as.
    uses: Vec<(Vec<String>, String)>,
}

/// A crate's modules, as its `mod` declarations bring them in.
#[derive(Debug)]
struct Graph {
    modules: Vec<Module>,
}

impl Graph {
    fn read(crate_root: &Path) -> Graph {
        let mut graph = Graph {
            modules: Vec::new(),
        };
        let dir = crate_root
            .parent()
            .expect("a crate root in a folder")
            .to_path_buf();
        graph.read_file(crate_root.to_path_buf(), Vec::new(), dir);
        graph
    }

    /// Reads one file's module (and the inline modules and files it
    /// declares); `dir` is where its `mod x;` files live.
    fn read_file(&mut self, file: PathBuf, path: Vec<String>, dir: PathBuf) -> usize {
        let text = fs::read_to_string(&file).unwrap_or_default();
        let tokens = tokens(&text);
        self.read_tokens(&tokens, file, path, dir)
    }

    fn read_tokens(
        &mut self,
        tokens: &[Tok],
        file: PathBuf,
        path: Vec<String>,
        dir: PathBuf,
    ) -> usize {
        let index = self.modules.len();
        self.modules.push(Module {
            file: file.clone(),
            path: path.clone(),
            children: BTreeMap::new(),
            reexports: Vec::new(),
            uses: Vec::new(),
        });
        let mut i = 0;
        let mut raw_uses: Vec<(Vec<String>, String, bool)> = Vec::new();
        while i < tokens.len() {
            match &tokens[i] {
                Tok::Punct('#') if is_cfg_test(tokens, i) => {
                    i = skip_item(tokens, attr_end(tokens, i));
                    continue;
                }
                Tok::Ident(w) if w == "mod" => {
                    if let Some(Tok::Ident(name)) = tokens.get(i + 1) {
                        let name = name.clone();
                        let mut child_path = path.clone();
                        child_path.push(name.clone());
                        let child_dir = dir.join(&name);
                        match tokens.get(i + 2) {
                            Some(Tok::Punct(';')) => {
                                let flat = dir.join(format!("{name}.rs"));
                                let nested = dir.join(&name).join("mod.rs");
                                let child_file = if flat.exists() { flat } else { nested };
                                if child_file.exists() {
                                    let child = self.read_file(child_file, child_path, child_dir);
                                    self.modules[index].children.insert(name, child);
                                }
                                i += 3;
                                continue;
                            }
                            Some(Tok::Punct('{')) => {
                                let end = matching(tokens, i + 2);
                                let inner = tokens[i + 3..end].to_vec();
                                let child =
                                    self.read_tokens(&inner, file.clone(), child_path, child_dir);
                                self.modules[index].children.insert(name, child);
                                i = end + 1;
                                continue;
                            }
                            _ => {}
                        }
                    }
                }
                Tok::Ident(w) if w == "use" => {
                    let public = i > 0 && is_pub_before(tokens, i);
                    let end = (i..tokens.len())
                        .find(|&j| tokens[j] == Tok::Punct(';'))
                        .unwrap_or(tokens.len());
                    let mut paths = Vec::new();
                    use_tree(&tokens[i + 1..end], &mut Vec::new(), &mut paths);
                    for (segments, alias) in paths {
                        raw_uses.push((segments, alias, public));
                    }
                    i = end + 1;
                    continue;
                }
                Tok::Ident(w)
                    if (w == "crate" || w == "super" || w == "self")
                        && tokens.get(i + 1) == Some(&Tok::Colons)
                        && (i == 0 || tokens[i - 1] != Tok::Colons) =>
                {
                    let (segments, next) = inline_path(tokens, i);
                    let alias = segments.last().cloned().unwrap_or_default();
                    raw_uses.push((segments, alias, false));
                    i = next;
                    continue;
                }
                Tok::Ident(w)
                    if tokens.get(i + 1) == Some(&Tok::Colons)
                        && (i == 0 || tokens[i - 1] != Tok::Colons)
                        && !KEYWORDS.contains(&w.as_str()) =>
                {
                    // A path from a child module (`engine::Engine`): kept
                    // as relative, resolved once the children are known.
                    let (segments, next) = inline_path(tokens, i);
                    let alias = segments.last().cloned().unwrap_or_default();
                    raw_uses.push((segments, alias, false));
                    i = next;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        // Relative paths become absolute now that the children are known.
        for (segments, alias, public) in raw_uses {
            let text = segments.join("::");
            let Some(absolute) = self.absolute(index, &segments) else {
                continue;
            };
            if public {
                self.modules[index]
                    .reexports
                    .push((alias, absolute.clone()));
            }
            self.modules[index].uses.push((absolute, text));
        }
        index
    }

    /// A path as written in module `at`, from the crate root; `None` for a
    /// path into another crate or the standard library.
    fn absolute(&self, at: usize, segments: &[String]) -> Option<Vec<String>> {
        let here = &self.modules[at].path;
        let first = segments.first()?;
        let mut out: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => here.clone(),
            "super" => {
                let mut base = here.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name if self.modules[at].children.contains_key(name) => {
                let mut base = here.clone();
                base.push(name.to_string());
                base.extend(segments[1..].iter().cloned());
                return Some(base);
            }
            _ => return None,
        };
        out.extend(segments[1..].iter().cloned());
        Some(out)
    }

    fn module_at(&self, path: &[String]) -> usize {
        let mut at = 0;
        for segment in path {
            match self.modules[at].children.get(segment) {
                Some(&child) => at = child,
                None => break,
            }
        }
        at
    }

    /// The module that defines what `path` names, following re-exports.
    fn defining(&self, path: &[String], depth: usize) -> usize {
        let mut at = 0;
        let mut consumed = 0;
        for segment in path {
            match self.modules[at].children.get(segment) {
                Some(&child) => {
                    at = child;
                    consumed += 1;
                }
                None => break,
            }
        }
        let Some(name) = path.get(consumed) else {
            return at;
        };
        if depth > 16 {
            return at;
        }
        let module = &self.modules[at];
        for (alias, target) in &module.reexports {
            if alias == name {
                let mut full = target.clone();
                full.extend(path[consumed + 1..].iter().cloned());
                return self.defining(&full, depth + 1);
            }
        }
        for (alias, target) in &module.reexports {
            if alias == "*" {
                let mut full = target.clone();
                full.extend(path[consumed..].iter().cloned());
                let found = self.defining(&full, depth + 1);
                if self.module_at(target) != found || self.defines(found, name) {
                    return found;
                }
            }
        }
        at
    }

    /// Whether a module's file looks like it defines `name` (for globs).
    fn defines(&self, at: usize, name: &str) -> bool {
        let text = fs::read_to_string(&self.modules[at].file).unwrap_or_default();
        [
            "fn", "struct", "enum", "trait", "type", "const", "static", "mod",
        ]
        .iter()
        .any(|kw| text.contains(&format!("{kw} {name}")))
    }

    /// Edges between files, cycles, and (for `lease-core`) upward imports.
    fn judge(&self, layers: Option<&Vec<(String, Vec<String>)>>, findings: &mut Findings) {
        let mut files: BTreeSet<PathBuf> = BTreeSet::new();
        let mut edges: BTreeMap<(PathBuf, PathBuf), BTreeSet<String>> = BTreeMap::new();
        for module in &self.modules {
            files.insert(module.file.clone());
            for (absolute, text) in &module.uses {
                if absolute.last().is_some_and(|s| s == "*") {
                    let target = self.module_at(&absolute[..absolute.len() - 1]);
                    self.add(&mut edges, module, target, text);
                    continue;
                }
                let target = self.defining(absolute, 0);
                self.add(&mut edges, module, target, text);
            }
        }
        findings.files += files.len();
        findings.edges += edges.len();
        let nodes: Vec<PathBuf> = files.into_iter().collect();
        let index: BTreeMap<&PathBuf, usize> =
            nodes.iter().enumerate().map(|(i, p)| (p, i)).collect();
        let mut adjacency = vec![Vec::new(); nodes.len()];
        for (from, to) in edges.keys() {
            if let (Some(&a), Some(&b)) = (index.get(from), index.get(to)) {
                adjacency[a].push(b);
            }
        }
        for component in strongly_connected(&adjacency) {
            if component.len() < 2 {
                continue;
            }
            let inside: BTreeSet<usize> = component.iter().copied().collect();
            let cycle = edges
                .iter()
                .filter(|((f, t), _)| inside.contains(&index[f]) && inside.contains(&index[t]))
                .map(|((f, t), names)| Edge {
                    from: f.clone(),
                    to: t.clone(),
                    names: names.clone(),
                })
                .collect();
            findings.cycles.push(cycle);
        }
        let Some(layers) = layers else {
            return;
        };
        // Top row first: a larger rank is a lower layer.
        let rank_of = |module: &Module| -> Option<(usize, String)> {
            let first = module.path.first()?;
            layers
                .iter()
                .position(|(_, modules)| modules.iter().any(|m| m == first))
                .map(|r| (r, layers[r].0.clone()))
        };
        let mut file_rank: BTreeMap<PathBuf, (usize, String)> = BTreeMap::new();
        for module in &self.modules {
            match rank_of(module) {
                Some(rank) => {
                    file_rank.insert(module.file.clone(), rank);
                }
                None if module.path.len() == 1 => findings.unplaced.push(module.path[0].clone()),
                None => {}
            }
        }
        for ((from, to), names) in &edges {
            let (Some((rf, lf)), Some((rt, lt))) = (file_rank.get(from), file_rank.get(to)) else {
                continue;
            };
            if rt < rf {
                let edge = Edge {
                    from: from.clone(),
                    to: to.clone(),
                    names: names.clone(),
                };
                findings.upward.push((lf.clone(), lt.clone(), edge));
            }
        }
    }

    fn add(
        &self,
        edges: &mut BTreeMap<(PathBuf, PathBuf), BTreeSet<String>>,
        module: &Module,
        target: usize,
        text: &str,
    ) {
        let to = &self.modules[target].file;
        if *to == module.file {
            return;
        }
        edges
            .entry((module.file.clone(), to.clone()))
            .or_default()
            .insert(text.to_string());
    }
}

/// First segments that never name a child module of ours.
const KEYWORDS: &[&str] = &["crate", "super", "self", "Self", "std", "core", "alloc"];

/// Tarjan's strongly connected components.
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adjacency: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for i in 0..s.adjacency[v].len() {
            let w = s.adjacency[v][i];
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = adjacency.len();
    let mut s = State {
        adjacency,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// A token of Rust source, with comments, strings and chars dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Colons,
    Punct(char),
}

fn tokens(text: &str) -> Vec<Tok> {
    tokens_with_lines(text).0
}

/// The tokens of `text`, and the line (from 1) each starts on.
fn tokens_with_lines(text: &str) -> (Vec<Tok>, Vec<usize>) {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut lines = Vec::new();
    // The line of each char, counted once.
    let mut line_of = Vec::with_capacity(chars.len());
    let mut line = 1;
    for c in &chars {
        line_of.push(line);
        if *c == '\n' {
            line += 1;
        }
    }
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || (next == Some('#') && raw_string_at(&chars, i)))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            j += 1; // the opening quote
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if c == 'b' && next == Some('"') {
            i = skip_string(&chars, i + 1);
        } else if c == '"' {
            i = skip_string(&chars, i);
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if chars.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
            lines.push(line_of[start]);
        } else if c == ':' && next == Some(':') {
            out.push(Tok::Colons);
            lines.push(line_of[i]);
            i += 2;
        } else if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
        } else {
            if !c.is_whitespace() {
                out.push(Tok::Punct(c));
                lines.push(line_of[i]);
            }
            i += 1;
        }
    }
    (out, lines)
}

/// The functions of `text` (outside `#[cfg(test)]` items) whose body spans
/// at least `min` lines: each name, first line and length in lines.
pub fn long_functions(text: &str, min: usize) -> Vec<(String, usize, usize)> {
    let (tokens, lines) = tokens_with_lines(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == Tok::Punct('#') && is_cfg_test(&tokens, i) {
            i = skip_item(&tokens, attr_end(&tokens, i));
            continue;
        }
        if tokens[i] == Tok::Ident("fn".into()) {
            if let Some(Tok::Ident(name)) = tokens.get(i + 1) {
                let body = (i + 2..tokens.len())
                    .find(|&j| matches!(tokens[j], Tok::Punct('{') | Tok::Punct(';')));
                if let Some(open) = body.filter(|&j| tokens[j] == Tok::Punct('{')) {
                    let close = matching(&tokens, open);
                    let length = lines[close] - lines[i] + 1;
                    if length >= min {
                        out.push((name.clone(), lines[i], length));
                    }
                }
            }
        }
        i += 1;
    }
    out
}

fn raw_string_at(chars: &[char], i: usize) -> bool {
    let mut j = i + 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

/// The index just past a string literal opening at `i`.
fn skip_string(chars: &[char], i: usize) -> usize {
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' => j += 2,
            '"' => return j + 1,
            _ => j += 1,
        }
    }
    j
}

/// `#[cfg(test)]` at `i`.
fn is_cfg_test(tokens: &[Tok], i: usize) -> bool {
    let want = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    tokens.get(i..i + want.len()) == Some(&want[..])
}

/// The index after the attribute opening at `i`.
fn attr_end(tokens: &[Tok], i: usize) -> usize {
    matching(tokens, i + 1) + 1
}

/// The index after the item starting at `i`: its `;`, or its body's `}`.
fn skip_item(tokens: &[Tok], i: usize) -> usize {
    let mut j = i;
    while j < tokens.len() {
        match tokens[j] {
            Tok::Punct(';') => return j + 1,
            Tok::Punct('{') => return matching(tokens, j) + 1,
            Tok::Punct('#') if tokens.get(j + 1) == Some(&Tok::Punct('[')) => {
                j = attr_end(tokens, j);
                continue;
            }
            _ => {}
        }
        j += 1;
    }
    j
}

/// The index of the bracket closing the one at `open`.
fn matching(tokens: &[Tok], open: usize) -> usize {
    let (o, c) = match tokens[open] {
        Tok::Punct('[') => ('[', ']'),
        Tok::Punct('(') => ('(', ')'),
        _ => ('{', '}'),
    };
    let mut depth = 0;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        if *t == Tok::Punct(o) {
            depth += 1;
        } else if *t == Tok::Punct(c) {
            depth -= 1;
            if depth == 0 {
                return j;
            }
        }
    }
    tokens.len().saturating_sub(1)
}

/// Whether the `use` at `i` is `pub` (or `pub(crate)`, `pub(super)`).
fn is_pub_before(tokens: &[Tok], i: usize) -> bool {
    let mut j = i;
    if j >= 1 && tokens[j - 1] == Tok::Punct(')') {
        while j > 0 && tokens[j - 1] != Tok::Punct('(') {
            j -= 1;
        }
        j = j.saturating_sub(1);
    }
    j >= 1 && tokens[j - 1] == Tok::Ident("pub".into())
}

/// A path written inline from `i` (`a::b::C`), and the index after it.
fn inline_path(tokens: &[Tok], i: usize) -> (Vec<String>, usize) {
    let mut segments = Vec::new();
    let mut j = i;
    while let Some(Tok::Ident(w)) = tokens.get(j) {
        segments.push(w.clone());
        if tokens.get(j + 1) == Some(&Tok::Colons) {
            j += 2;
        } else {
            j += 1;
            break;
        }
    }
    (segments, j)
}

/// The paths of a `use` tree (`a::{b::C, d as E, f::*}`), each with the
/// name it binds.
fn use_tree(tokens: &[Tok], prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let mut i = 0;
    let start = prefix.len();
    while i < tokens.len() {
        match &tokens[i] {
            Tok::Colons => {}
            Tok::Ident(w) if w == "as" => {
                if let Some(Tok::Ident(alias)) = tokens.get(i + 1) {
                    if let Some(last) = out.last_mut() {
                        last.1 = alias.clone();
                    }
                }
                i += 2;
                continue;
            }
            Tok::Ident(w) => {
                prefix.push(w.clone());
                let ends = !matches!(tokens.get(i + 1), Some(Tok::Colons));
                if ends {
                    let name = if w == "self" {
                        prefix[prefix.len().saturating_sub(2)].clone()
                    } else {
                        w.clone()
                    };
                    let mut path = prefix.clone();
                    if w == "self" && path.len() > 1 {
                        path.pop();
                    }
                    out.push((path, name));
                }
            }
            Tok::Punct('*') => {
                let mut path = prefix.clone();
                path.push("*".into());
                out.push((path, "*".into()));
            }
            Tok::Punct('{') => {
                let end = matching(tokens, i);
                let inner = &tokens[i + 1..end];
                // Each comma-separated branch of the group, from this prefix.
                let mut depth = 0;
                let mut from = 0;
                for (k, t) in inner.iter().enumerate() {
                    match t {
                        Tok::Punct('{') => depth += 1,
                        Tok::Punct('}') => depth -= 1,
                        Tok::Punct(',') if depth == 0 => {
                            use_tree(&inner[from..k], &mut prefix.clone(), out);
                            from = k + 1;
                        }
                        _ => {}
                    }
                }
                use_tree(&inner[from..], &mut prefix.clone(), out);
                i = end + 1;
                continue;
            }
            Tok::Punct(',') => {
                prefix.truncate(start);
            }
            _ => {}
        }
        i += 1;
    }
    prefix.truncate(start);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "lease-layers-{}-{}",
            std::process::id(),
            files.len() * 1000 + files.iter().map(|f| f.1.len()).sum::<usize>()
        ));
        let _ = fs::remove_dir_all(&dir);
        for (path, text) in files {
            let p = dir.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        dir
    }

    fn check(files: &[(&str, &str)]) -> Findings {
        let dir = tree(files);
        let findings = check_workspace(&dir);
        fs::remove_dir_all(&dir).unwrap();
        findings
    }

    const MANIFEST: &str = "[workspace]\nmembers = [\"lease-core\"]\n";
    const LIB: &str = "//! # Layers\n//!\n//! | layer | modules | what |\n//! |---|---|---|\n//! | top | [`b`] | x |\n//! | bottom | [`a`] | y |\n//!\n//! # Next\nmod a;\nmod b;\npub use a::A;\n";

    #[test]
    fn an_inline_crate_path_closes_a_cycle() {
        let f = check(&[
            ("Cargo.toml", MANIFEST),
            ("lease-core/src/lib.rs", LIB),
            (
                "lease-core/src/a.rs",
                "pub struct A;\nfn f() { crate::b::g(); }\n",
            ),
            ("lease-core/src/b.rs", "use crate::A;\npub fn g() {}\n"),
        ]);
        assert_eq!(f.cycles.len(), 1, "{f:?}");
        assert_eq!(f.upward.len(), 1, "{f:?}");
        assert!(f.upward[0].2.names.contains("crate::b::g"), "{f:?}");
    }

    #[test]
    fn a_reexport_at_the_root_is_followed_and_tests_are_not_read() {
        let f = check(&[
            ("Cargo.toml", MANIFEST),
            ("lease-core/src/lib.rs", LIB),
            (
                "lease-core/src/a.rs",
                "pub struct A;\n// crate::b::g\nconst S: &str = \"crate::b::g\";\n#[cfg(test)]\nmod tests { use crate::b::g; }\n",
            ),
            ("lease-core/src/b.rs", "use crate::{A, a::*};\npub fn g() {}\n"),
        ]);
        assert!(
            f.cycles.is_empty() && f.upward.is_empty() && f.unplaced.is_empty(),
            "{f:?}"
        );
        assert_eq!(f.edges, 2, "root -> a (the re-export), b -> a: {f:?}");
    }

    #[test]
    fn super_and_child_paths_and_unplaced_modules_are_seen() {
        let f = check(&[
            ("Cargo.toml", MANIFEST),
            ("lease-core/src/lib.rs", &format!("{LIB}mod c;\n")),
            ("lease-core/src/a.rs", "pub struct A;\n"),
            ("lease-core/src/b.rs", "pub fn g() {}\n"),
            (
                "lease-core/src/c/mod.rs",
                "mod d;\npub fn h() { d::k(); }\n",
            ),
            ("lease-core/src/c/d.rs", "pub fn k() { super::h(); }\n"),
        ]);
        assert_eq!(f.cycles.len(), 1, "{f:?}");
        assert_eq!(f.unplaced, vec!["c".to_string()], "{f:?}");
    }
}
