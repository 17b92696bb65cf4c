//! `make sizes`: the figures that say whether the code grows or shrinks,
//! read from the source (BENCHMARKS.md, "Sizes of the code").
//!
//! - lines per workspace crate (`src/**/*.rs`, every line), with the
//!   product's total: the crates users build (`lease-core` without the
//!   verification hooks, the adapters, the CLI, the demo), and the
//!   verification beside them (those hooks, and the simulator's crate);
//! - `lease-core`'s public surface: public types, public modules and names
//!   re-exported at the crate root;
//! - product files over 800 lines and product functions of 80 lines or
//!   more (outside `#[cfg(test)]`), each named.
//!
//! `make sizes` measures this checkout; `cargo run -p lease-tests --bin sizes
//! -- DIR` another (a `git worktree` of an earlier commit).
//! Duplicates are counted by the `duplicates` tool, outside the repository.

use lease_tests::layers::{long_functions, members};
use std::fs;
use std::path::{Path, PathBuf};

/// Crates users build; the rest are examples, tests and tools.
const PRODUCT: &[&str] = &["lease-core", "native", "lambda", "cli", "cloudflare", "web"];

/// Crates that are verification, not product: the simulator (`sim/`,
/// lease-sim).
const VERIFICATION: &[&str] = &["sim"];

/// `lease-core`'s files that are verification, not product (`src/sim/`:
/// the simulator, before it became the crate `lease-sim`, for measuring
/// an earlier checkout).
fn verification(path: &Path) -> bool {
    let p = path.to_string_lossy();
    p.contains("lease-core/src/sim/")
        || ["verify.rs", "variants.rs", "mutants.rs"]
            .iter()
            .any(|f| p.ends_with(&format!("lease-core/src/{f}")))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn lines(p: &Path) -> usize {
    fs::read_to_string(p)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn main() {
    // The workspace this binary was built in, or the checkout named (to
    // measure an earlier commit the same way).
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .into()
        });
    let root = root.as_path();
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("workspace manifest");
    let members = members(&manifest);

    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let (mut product_total, mut verification_total, mut other_total) = (0, 0, 0);
    let mut product_files = Vec::new();
    println!("## Lines per crate (src/**/*.rs)\n");
    println!("| crate | product | verification | other |");
    println!("|---|---|---|---|");
    for member in &members {
        let mut files = Vec::new();
        rust_files(&root.join(member).join("src"), &mut files);
        let product = PRODUCT.contains(&member.as_str());
        let (mut p, mut v, mut o) = (0, 0, 0);
        for f in &files {
            let n = lines(f);
            if (product && verification(f)) || VERIFICATION.contains(&member.as_str()) {
                v += n;
            } else if product {
                p += n;
                product_files.push((f.clone(), n));
            } else {
                o += n;
            }
        }
        println!("| {member} | {p} | {v} | {o} |");
        product_total += p;
        verification_total += v;
        other_total += o;
    }
    let mut all = Vec::new();
    rust_files(root, &mut all);
    let tree: usize = all
        .iter()
        .filter(|p| {
            let s = p.to_string_lossy();
            !s.contains("/target/") && !s.contains("/node_modules/") && !s.contains("/.git/")
        })
        .map(|p| lines(p))
        .sum();
    println!("| **total** | **{product_total}** | {verification_total} | {other_total} |");
    println!("\nEvery .rs file of the tree (tests, benches, fuzz, examples too): {tree} lines.");

    // lease-core's public surface, outside the simulator.
    let mut core = Vec::new();
    rust_files(&root.join("lease-core/src"), &mut core);
    let (mut types, mut modules) = (0, 0);
    for f in core.iter().filter(|f| !verification(f)) {
        let text = fs::read_to_string(f).unwrap_or_default();
        for line in text.lines().map(str::trim_start) {
            if ["pub struct ", "pub enum ", "pub trait ", "pub type "]
                .iter()
                .any(|k| line.starts_with(k))
            {
                types += 1;
            }
            if line.starts_with("pub mod ") {
                modules += 1;
            }
        }
    }
    let lib = fs::read_to_string(root.join("lease-core/src/lib.rs")).unwrap_or_default();
    let mut reexports = 0;
    let mut in_use = false;
    for line in lib.lines().map(str::trim) {
        if line.starts_with("pub use ") {
            in_use = true;
        }
        if in_use {
            let names = line
                .trim_start_matches("pub use ")
                .rsplit("::")
                .next()
                .unwrap_or("");
            reexports += names
                .split(',')
                .map(|n| n.trim_matches(|c: char| "{}; ".contains(c)))
                .filter(|n| !n.is_empty())
                .count();
            in_use = !line.ends_with(';');
        }
    }
    println!("\n## lease-core's public surface (outside the simulator)\n");
    println!("- public types (pub struct, enum, trait, type): {types}");
    println!("- public modules (pub mod): {modules}");
    println!("- names re-exported at the crate root: {reexports}");

    product_files.sort_by_key(|f| std::cmp::Reverse(f.1));
    let big: Vec<_> = product_files.iter().filter(|(_, n)| *n > 800).collect();
    println!("\n## Product files over 800 lines: {}\n", big.len());
    for (f, n) in &big {
        println!("- {} ({n})", rel(f));
    }
    let mut long = Vec::new();
    for (f, _) in &product_files {
        let text = fs::read_to_string(f).unwrap_or_default();
        for (name, line, length) in long_functions(&text, 80) {
            long.push((length, format!("{}:{line} {name}", rel(f))));
        }
    }
    long.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    println!(
        "\n## Product functions of 80 lines or more: {}\n",
        long.len()
    );
    for (length, at) in &long {
        println!("- {at} ({length})");
    }
}
