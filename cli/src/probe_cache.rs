//! The capability probe's verdict, kept between invocations of `lease`.
//!
//! Each `lease` invocation is a new process, and the probe (about 12
//! requests) would otherwise run before every `acquire` and `run`. A
//! passed probe is remembered in a small file, one per store, bucket and
//! protocol:
//!
//! - where: `$LEASE_PROBE_CACHE_DIR`, else `$XDG_CACHE_HOME/lease`, else
//!   `$HOME/.cache/lease`; with none of them set nothing is kept;
//! - name: `probe-<digest>.json`, the digest (FNV-1a, 64 bits) of the
//!   provider, endpoint, region, bucket, protocol and this version of
//!   `lease`;
//! - content: those same fields in the clear and `probed_at_ms` (the
//!   local wall time of the probe): nothing secret, no credentials;
//! - reused while younger than [`MAX_AGE`] and written by this version;
//!   forgotten (the file deleted) when an operation meets a capability
//!   error (an unsafe store, a condition the store says it does not
//!   support), so the next invocation probes again. `lease probe` always
//!   probes afresh and does not read the file.
//!
//! A stale verdict is as good as the store's behaviour is stable: a store
//! that stops honouring conditions within a day goes unnoticed until its
//! replies say so. `LEASE_PROBE=off` skips the probe altogether;
//! `LEASE_PROBE_CACHE_DIR=` (empty) turns the cache off.

use lease_core::{Protocol, StoreSettings};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// How long a passed probe is trusted.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// The cache file of one store, bucket and protocol.
#[derive(Clone, Debug)]
pub struct ProbeCache {
    path: PathBuf,
    fields: serde_json::Value,
}

impl ProbeCache {
    /// The cache for `settings` and `protocol`, in the directory the
    /// environment names (see the module docs); `None` when it names none.
    pub fn locate(
        env: impl Fn(&str) -> Option<String>,
        settings: &StoreSettings,
        protocol: Protocol,
    ) -> Option<ProbeCache> {
        let dir = match env("LEASE_PROBE_CACHE_DIR") {
            Some(dir) if dir.is_empty() => return None,
            Some(dir) => PathBuf::from(dir),
            None => match env("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
                Some(dir) => PathBuf::from(dir).join("lease"),
                None => PathBuf::from(env("HOME").filter(|d| !d.is_empty())?)
                    .join(".cache")
                    .join("lease"),
            },
        };
        let fields = json!({
            "provider": format!("{:?}", settings.provider),
            "endpoint": settings.endpoint,
            "region": settings.region,
            "bucket": settings.bucket,
            "protocol": protocol.name(),
            "version": env!("CARGO_PKG_VERSION"),
        });
        let digest = lease_core::tick::digest(fields.to_string().as_bytes());
        let digest = digest.trim_start_matches("fnv1a64:");
        Some(ProbeCache {
            path: dir.join(format!("probe-{digest}.json")),
            fields,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Whether a probe passed for this store within [`MAX_AGE`] of
    /// `now_ms` (the local wall clock, ms since the UNIX epoch). A file
    /// that is unreadable, of another store or version, or dated in the
    /// future does not count.
    pub fn fresh(&self, now_ms: u64) -> bool {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return false;
        };
        let Ok(kept) = serde_json::from_str::<serde_json::Value>(&text) else {
            return false;
        };
        let same = self
            .fields
            .as_object()
            .is_some_and(|f| f.iter().all(|(k, v)| kept.get(k) == Some(v)));
        let Some(at) = kept.get("probed_at_ms").and_then(|v| v.as_u64()) else {
            return false;
        };
        same && at <= now_ms && now_ms - at < MAX_AGE.as_millis() as u64
    }

    /// Remembers a probe passed at `now_ms`. Best effort: a cache that
    /// cannot be written only means the next invocation probes again.
    pub fn remember(&self, now_ms: u64) {
        let mut kept = self.fields.clone();
        kept["probed_at_ms"] = json!(now_ms);
        let Some(dir) = self.path.parent() else {
            return;
        };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        // Written whole, then renamed: a reader never sees half a file.
        let tmp = self
            .path
            .with_extension(format!("tmp.{}", std::process::id()));
        if std::fs::write(&tmp, kept.to_string()).is_ok()
            && std::fs::rename(&tmp, &self.path).is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Forgets the verdict: the next invocation probes again.
    pub fn forget(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lease_core::settings::lookup_in;

    fn settings(bucket: &str) -> StoreSettings {
        StoreSettings::from_lookup(lookup_in(&[
            ("LEASE_BUCKET", bucket),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "a-secret-that-must-not-be-kept"),
        ]))
        .expect("settings")
    }

    #[test]
    fn a_verdict_is_kept_per_store_and_protocol_for_a_day() {
        let dir = std::env::temp_dir().join(format!("lease-probe-cache-{}", std::process::id()));
        let d = dir.to_str().unwrap().to_string();
        let vars = [("LEASE_PROBE_CACHE_DIR", d.as_str())];
        let env = lookup_in(&vars);
        let cache = ProbeCache::locate(&env, &settings("locks-a"), Protocol::Cas).unwrap();
        let now = 1_790_000_000_000;
        assert!(!cache.fresh(now), "nothing kept yet");
        cache.remember(now);
        assert!(cache.fresh(now + 1_000));
        assert!(!cache.fresh(now + MAX_AGE.as_millis() as u64), "too old");
        assert!(!cache.fresh(now - 1_000), "dated in the future");
        let other_bucket = ProbeCache::locate(&env, &settings("locks-b"), Protocol::Cas).unwrap();
        let other_protocol =
            ProbeCache::locate(&env, &settings("locks-a"), Protocol::Mutex).unwrap();
        assert!(!other_bucket.fresh(now + 1_000) && !other_protocol.fresh(now + 1_000));
        let text = std::fs::read_to_string(cache.path()).unwrap();
        assert!(
            !text.contains("a-secret")
                && !text.contains("AKIDEXAMPLE")
                && text.contains("\"bucket\":\"locks-a\""),
            "{text}"
        );
        cache.forget();
        assert!(!cache.fresh(now + 1_000));
        std::fs::write(cache.path(), "{not json").unwrap();
        assert!(
            !cache.fresh(now + 1_000),
            "an unreadable file does not count"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_directory_comes_from_the_environment_or_nowhere() {
        let s = settings("locks-a");
        let at = |vars: &[(&str, &str)]| {
            ProbeCache::locate(lookup_in(vars), &s, Protocol::Cas).map(|c| c.path().to_path_buf())
        };
        assert!(at(&[("LEASE_PROBE_CACHE_DIR", "")]).is_none());
        assert!(at(&[]).is_none());
        assert!(at(&[("HOME", "/home/u")])
            .unwrap()
            .starts_with("/home/u/.cache/lease"));
        assert!(at(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/c")])
            .unwrap()
            .starts_with("/c/lease"));
    }
}
