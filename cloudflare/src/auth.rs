//! Who may call a Worker's HTTP routes: one bearer secret, one rule.
//!
//! A Worker on its workers.dev address or a route answers anyone on the
//! internet. The rule for every route that changes a lease, breaks one, or
//! makes the Worker write to the bucket:
//!
//! | the Worker has the secret | the request | answer |
//! |---|---|---|
//! | no (or an unusable one) | anything | **403**, a JSON message saying how to set it: the route is disabled, never open |
//! | yes | no `Authorization`, another scheme, an empty or wrong token | **401** with `WWW-Authenticate: Bearer` |
//! | yes | `Authorization: Bearer <the secret>` | [`Access::Allowed`] |
//!
//! The secret is a Worker secret named [`ADMIN_TOKEN`] (`LEASE_ADMIN_TOKEN`):
//!
//! ```sh
//! openssl rand -hex 32 | npx wrangler secret put LEASE_ADMIN_TOKEN
//! ```
//!
//! It must be at least [`MIN_SECRET_LEN`] characters of printable ASCII
//! without spaces; one that is not disables the routes (403, saying why),
//! because a short secret can be guessed over HTTP. Set it as a secret,
//! never in `[vars]` of `wrangler.toml`, where it would be in the repository
//! and in the dashboard in clear.
//!
//! A read-only route may also serve anonymous callers a reduced view (the
//! example's `GET /lease` says only whether the lease is held and until
//! when): [`AdminAuth::caller`] tells the admin, an anonymous caller and a
//! caller with bad credentials apart. Bad credentials are refused there
//! too, rather than silently answered with less.
//!
//! The presented token and the secret are compared as SHA-256 digests with
//! a constant-time equality ([`subtle`]), so the time taken depends neither
//! on where they differ nor on the secret's length. [`AdminAuth`] keeps only
//! the digest; no answer, error or `Debug` output contains the secret or
//! the presented token. Do not log the `worker::Request` itself: its
//! `Debug` prints every header, `Authorization` included.
//!
//! ```no_run
//! use lease_cloudflare::auth::{self, Access};
//! use worker::*;
//!
//! #[event(fetch)]
//! async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
//!     if req.method() == Method::Post && req.path() == "/jobs/run-now" {
//!         if let Access::Denied(reply) = auth::require(&req, &env) {
//!             return reply.into_response(); // 401 or 403, ready to send
//!         }
//!         // ... the caller holds the secret: change things ...
//!     }
//!     Response::error("not found", 404)
//! }
//! # fn main() {}
//! ```

use crate::lease::Reply;
use crate::settings;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::fmt;
use subtle::ConstantTimeEq;
use worker::{Env, Request};

/// The name of the Worker secret that guards the routes.
pub const ADMIN_TOKEN: &str = "LEASE_ADMIN_TOKEN";

/// The shortest secret accepted, in characters (`openssl rand -hex 32`
/// gives 64).
pub const MIN_SECRET_LEN: usize = 16;

/// The `realm` the 401 answers name in `WWW-Authenticate`.
const REALM: &str = "lease";

/// A route's decision for a caller that must hold the secret.
#[must_use = "a Denied access must be answered with its reply"]
#[derive(Clone, Debug, PartialEq)]
pub enum Access {
    /// The request carries the right bearer token.
    Allowed,
    /// Refused: send this reply (401 for missing or wrong credentials, 403
    /// when the Worker has no usable secret).
    Denied(Reply),
}

/// Who is calling a route that also serves anonymous callers.
#[must_use = "a Refused caller must be answered with its reply"]
#[derive(Clone, Debug, PartialEq)]
pub enum Caller {
    /// The request carries the right bearer token: show everything.
    Admin,
    /// No `Authorization` header: show only what is public.
    Anonymous,
    /// Credentials were sent but are wrong (401), or the Worker has no
    /// usable secret to check them against (403): send this reply.
    Refused(Reply),
}

#[derive(Clone)]
enum Secret {
    Unset,
    Unusable(&'static str),
    Set([u8; 32]),
}

/// The Worker's admin secret, kept as its SHA-256 digest, and the checks
/// against it. `Debug` says whether it is set, never what it is.
#[derive(Clone)]
pub struct AdminAuth {
    name: &'static str,
    secret: Secret,
}

impl fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.secret {
            Secret::Unset => "unset",
            Secret::Unusable(_) => "unusable",
            Secret::Set(_) => "set",
        };
        f.debug_struct("AdminAuth")
            .field("name", &self.name)
            .field("secret", &state)
            .finish()
    }
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Whether `presented` is `secret`, in time that does not depend on where
/// they differ or on their lengths (both are hashed to 32 bytes first).
pub fn same_secret(presented: &str, secret: &str) -> bool {
    digest_matches(presented, &digest(secret))
}

fn digest_matches(presented: &str, secret: &[u8; 32]) -> bool {
    digest(presented).ct_eq(secret).into()
}

fn is_space(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// The token of an `Authorization: Bearer <token>` header value: the scheme
/// in any case, spaces or tabs around and between; `None` for another
/// scheme, a missing or empty token, or a token with spaces inside.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let value = authorization.trim_matches(is_space);
    let (scheme, token) = value.split_once(is_space)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim_matches(is_space);
    if token.is_empty() || token.contains(is_space) {
        return None;
    }
    Some(token)
}

impl AdminAuth {
    /// The secret [`ADMIN_TOKEN`] from the Worker's environment.
    pub fn from_env(env: &Env) -> AdminAuth {
        AdminAuth::from_env_named(env, ADMIN_TOKEN)
    }

    /// The secret named `name` from the Worker's environment (a Worker
    /// guarding different routes with different secrets).
    pub fn from_env_named(env: &Env, name: &'static str) -> AdminAuth {
        AdminAuth::new(name, settings::lookup(env)(name).as_deref())
    }

    /// From the secret's value (`None` or blank: not set). Spaces around it
    /// are dropped (a value pasted into the dashboard may keep a newline).
    pub fn new(name: &'static str, secret: Option<&str>) -> AdminAuth {
        let secret = match secret.map(str::trim).filter(|s| !s.is_empty()) {
            None => Secret::Unset,
            Some(s) if !s.bytes().all(|b| b.is_ascii_graphic()) => {
                Secret::Unusable("it must be printable ASCII without spaces")
            }
            Some(s) if s.len() < MIN_SECRET_LEN => {
                Secret::Unusable("it is too short to resist guessing")
            }
            Some(s) => Secret::Set(digest(s)),
        };
        AdminAuth { name, secret }
    }

    /// Whether a usable secret is set.
    pub fn is_set(&self) -> bool {
        matches!(self.secret, Secret::Set(_))
    }

    /// For a route that only the secret's holder may call.
    pub fn require(&self, req: &Request) -> Access {
        self.require_header(authorization(req).as_deref())
    }

    /// [`AdminAuth::require`] on the `Authorization` header's value.
    pub fn require_header(&self, authorization: Option<&str>) -> Access {
        match self.caller_header(authorization) {
            Caller::Admin => Access::Allowed,
            Caller::Refused(reply) => Access::Denied(reply),
            Caller::Anonymous => Access::Denied(match self.secret() {
                Ok(_) => self.unauthorized(None),
                Err(disabled) => disabled,
            }),
        }
    }

    /// For a route that answers everyone but shows the admin more.
    pub fn caller(&self, req: &Request) -> Caller {
        self.caller_header(authorization(req).as_deref())
    }

    /// [`AdminAuth::caller`] on the `Authorization` header's value.
    pub fn caller_header(&self, authorization: Option<&str>) -> Caller {
        let Some(authorization) = authorization else {
            return Caller::Anonymous;
        };
        let secret = match self.secret() {
            Ok(secret) => secret,
            Err(disabled) => return Caller::Refused(disabled),
        };
        if authorization.trim_matches(is_space).is_empty() {
            return Caller::Refused(self.unauthorized(None));
        }
        match bearer_token(authorization) {
            Some(token) if digest_matches(token, secret) => Caller::Admin,
            Some(_) => Caller::Refused(self.unauthorized(Some(("invalid_token", "wrong")))),
            None => Caller::Refused(self.unauthorized(Some(("invalid_request", "malformed")))),
        }
    }

    fn secret(&self) -> Result<&[u8; 32], Reply> {
        match &self.secret {
            Secret::Set(secret) => Ok(secret),
            Secret::Unset => Err(self.disabled(None)),
            Secret::Unusable(why) => Err(self.disabled(Some(why))),
        }
    }

    fn disabled(&self, unusable: Option<&str>) -> Reply {
        let name = self.name;
        let why = match unusable {
            None => format!("{name} is not set"),
            Some(why) => format!("{name} is set but unusable: {why}"),
        };
        Reply::new(
            403,
            json!({
                "error": "disabled",
                "message": format!(
                    "this route is disabled: {why}. Enable it with \
                     `openssl rand -hex 32 | npx wrangler secret put {name}` \
                     (at least {MIN_SECRET_LEN} printable ASCII characters, no spaces), \
                     then send `Authorization: Bearer <the secret>`"
                ),
            }),
        )
    }

    fn unauthorized(&self, problem: Option<(&str, &str)>) -> Reply {
        let name = self.name;
        let (challenge, message) = match problem {
            None => (
                format!("Bearer realm=\"{REALM}\""),
                format!("this route needs `Authorization: Bearer <the secret in {name}>`"),
            ),
            Some((code, what)) => (
                format!("Bearer realm=\"{REALM}\", error=\"{code}\""),
                format!(
                    "the Authorization header is {what}: \
                     send `Authorization: Bearer <the secret in {name}>`"
                ),
            ),
        };
        Reply::new(401, json!({"error": "unauthorized", "message": message}))
            .with_header("WWW-Authenticate", challenge)
    }
}

fn authorization(req: &Request) -> Option<String> {
    req.headers().get("Authorization").ok().flatten()
}

/// For a route that only the holder of [`ADMIN_TOKEN`] may call: the
/// shorthand for `AdminAuth::from_env(env).require(req)`.
pub fn require(req: &Request, env: &Env) -> Access {
    AdminAuth::from_env(env).require(req)
}

/// For a route that answers everyone but shows the holder of
/// [`ADMIN_TOKEN`] more: `AdminAuth::from_env(env).caller(req)`.
pub fn caller(req: &Request, env: &Env) -> Caller {
    AdminAuth::from_env(env).caller(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t-0123456789abcdef";

    fn auth() -> AdminAuth {
        AdminAuth::new(ADMIN_TOKEN, Some(SECRET))
    }

    fn status(access: Access) -> Option<u16> {
        match access {
            Access::Allowed => None,
            Access::Denied(reply) => Some(reply.status),
        }
    }

    #[test]
    fn same_secret_only_for_the_same_bytes() {
        assert!(same_secret(SECRET, SECRET));
        assert!(!same_secret("", SECRET));
        assert!(!same_secret(&SECRET[..SECRET.len() - 1], SECRET));
        assert!(!same_secret(&format!("{SECRET}x"), SECRET));
        let mut first = SECRET.to_string();
        first.replace_range(0..1, "S");
        assert!(!same_secret(&first, SECRET));
        let mut last = SECRET.to_string();
        last.replace_range(SECRET.len() - 1.., "F");
        assert!(!same_secret(&last, SECRET));
        assert!(!same_secret(&SECRET.to_uppercase(), SECRET));
    }

    #[test]
    fn bearer_scheme_in_any_case_with_spaces_around() {
        for header in [
            "Bearer tok",
            "bearer tok",
            "BEARER tok",
            "bEaReR tok",
            "Bearer   tok",
            "Bearer\ttok",
            "  Bearer tok  ",
            "Bearer tok\t",
        ] {
            assert_eq!(bearer_token(header), Some("tok"), "{header:?}");
        }
    }

    #[test]
    fn bearer_refuses_other_schemes_and_empty_or_split_tokens() {
        for header in [
            "",
            "   ",
            "Bearer",
            "Bearer ",
            "Bearer \t ",
            "Bearertok",
            "Basic dXNlcjpwYXNz",
            "Token tok",
            "tok",
            "Bearer tok extra",
            "Bearer tok, Bearer other",
            "Bearer: tok",
        ] {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }

    #[test]
    fn the_right_token_is_allowed_in_any_scheme_case() {
        let auth = auth();
        assert!(auth.is_set());
        for header in [
            format!("Bearer {SECRET}"),
            format!("bearer {SECRET}"),
            format!("  BEARER \t{SECRET} "),
        ] {
            assert_eq!(auth.require_header(Some(&header)), Access::Allowed);
            assert_eq!(auth.caller_header(Some(&header)), Caller::Admin);
        }
    }

    #[test]
    fn missing_wrong_or_malformed_credentials_get_401_with_a_bearer_challenge() {
        let auth = auth();
        let wrong = format!("Bearer {SECRET}x");
        let basic = format!("Basic {SECRET}");
        for header in [
            None,
            Some(""),
            Some("Bearer "),
            Some(&*wrong),
            Some(&*basic),
        ] {
            let Access::Denied(reply) = auth.require_header(header) else {
                panic!("{header:?} was allowed");
            };
            assert_eq!(reply.status, 401, "{header:?}");
            let challenge = reply
                .headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("www-authenticate"))
                .map(|(_, value)| value.as_str());
            assert!(
                challenge.is_some_and(|c| c.starts_with("Bearer realm=\"lease\"")),
                "{header:?}: {challenge:?}"
            );
            assert_eq!(reply.body["error"], "unauthorized");
            assert!(!reply.body.to_string().contains(SECRET));
        }
    }

    #[test]
    fn a_read_route_tells_anonymous_from_bad_credentials() {
        let auth = auth();
        assert_eq!(auth.caller_header(None), Caller::Anonymous);
        for header in ["", "Bearer nope-nope-nope-nope", "Basic x"] {
            match auth.caller_header(Some(header)) {
                Caller::Refused(reply) => assert_eq!(reply.status, 401, "{header:?}"),
                other => panic!("{header:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn without_a_usable_secret_every_protected_call_is_403_saying_how_to_enable() {
        for (secret, why) in [
            (None, "is not set"),
            (Some(""), "is not set"),
            (Some("  \n"), "is not set"),
            (Some("tiny-secret"), "too short"),
            (Some("has a space 0123456789"), "printable ASCII"),
            (Some("non-ascii-ünïcødé-0123456789"), "printable ASCII"),
        ] {
            let auth = AdminAuth::new(ADMIN_TOKEN, secret);
            assert!(!auth.is_set());
            let presented = secret.map(|s| format!("Bearer {s}"));
            for header in [None, presented.as_deref(), Some("Bearer short")] {
                let Access::Denied(reply) = auth.require_header(header) else {
                    panic!("{secret:?} {header:?} was allowed");
                };
                assert_eq!(reply.status, 403, "{secret:?} {header:?}");
                assert_eq!(reply.body["error"], "disabled");
                let message = reply.body["message"].as_str().unwrap_or_default();
                assert!(message.contains(why), "{message}");
                assert!(
                    message.contains("wrangler secret put LEASE_ADMIN_TOKEN"),
                    "{message}"
                );
                if let Some(secret) = secret.filter(|s| !s.trim().is_empty()) {
                    assert!(!reply.body.to_string().contains(secret), "{message}");
                }
            }
            // Anonymous readers still get the public view; credentials are refused.
            assert_eq!(auth.caller_header(None), Caller::Anonymous);
            assert!(matches!(
                auth.caller_header(Some("Bearer x")),
                Caller::Refused(Reply { status: 403, .. })
            ));
        }
    }

    #[test]
    fn the_secret_is_trimmed_and_a_longer_one_is_fine() {
        let auth = AdminAuth::new(ADMIN_TOKEN, Some(&format!("{SECRET}\n")));
        assert_eq!(
            auth.require_header(Some(&format!("Bearer {SECRET}"))),
            Access::Allowed
        );
        let exact = "a".repeat(MIN_SECRET_LEN);
        let auth = AdminAuth::new(ADMIN_TOKEN, Some(&exact));
        assert_eq!(
            status(auth.require_header(Some(&format!("Bearer {exact}")))),
            None
        );
        let shorter = "a".repeat(MIN_SECRET_LEN - 1);
        let auth = AdminAuth::new(ADMIN_TOKEN, Some(&shorter));
        assert_eq!(
            status(auth.require_header(Some(&format!("Bearer {shorter}")))),
            Some(403)
        );
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let debug = format!("{:?}", auth());
        assert_eq!(
            debug,
            r#"AdminAuth { name: "LEASE_ADMIN_TOKEN", secret: "set" }"#
        );
        assert!(!debug.contains(SECRET));
        let unusable = format!("{:?}", AdminAuth::new(ADMIN_TOKEN, Some("tiny-secret")));
        assert!(!unusable.contains("tiny-secret"), "{unusable}");
        assert!(unusable.contains("unusable"), "{unusable}");
        let access = auth().require_header(Some(&format!("Bearer {SECRET}x")));
        assert!(!format!("{access:?}").contains(SECRET));
    }
}
