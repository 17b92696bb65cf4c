//! Sessions against moto: keys owned under a session (`Leases::session`,
//! `Session::own`) through the native transport, seen by the `lease`
//! CLI as an operator would: `lease ls` names the session and its keys,
//! a plain `lease acquire` finds an owned key busy long past the key's
//! own stamp, and `lease break` of the session frees every key it owns.

mod support;

use lease_core::client::OwnOutcome;
use lease_core::{Leases, Settings};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use std::time::Duration;
use support::*;

#[test]
fn an_operator_sees_a_sessions_keys_and_breaking_the_session_frees_them() {
    let (_moto, settings) = moto_and_settings(false);
    let leases = Leases::new(
        store(&settings),
        SystemClock::new(),
        Settings::new("svc-a").ttl(Duration::from_secs(3)),
        os_entropy,
    )
    .expect("valid settings");
    let (session, campaign) = leases.session("owned/sessions/a");
    // The campaign renews the session on a thread of its own, as a
    // spawned task would.
    let renewing = std::thread::spawn(move || block_on(campaign));
    let token = block_on(session.until_open()).expect("the session opens");
    for key in ["owned/tenants/1", "owned/tenants/2"] {
        match block_on(session.own(key)) {
            Ok(OwnOutcome::Owned(owned)) => {
                assert_eq!((owned.token, owned.session_token), (1, token))
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    // Past the keys' own stamps (a ttl): still owned, one renewal of the
    // session per interval keeping both.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(session.owns("owned/tenants/1"), Some(1));
    let (code, _, out) =
        lease_json(lease(&settings, "owned/tenants/1").args(["acquire", "--ttl", "3s", "--json"]));
    assert_eq!(code, 3, "a plain acquire took an owned key: {out}");
    // `lease inspect` names the session and says the key is held.
    let seen = lease_ok(lease(&settings, "owned/tenants/1").args(["inspect", "--json"]));
    assert_eq!(seen["owned_by"]["session"], "owned/sessions/a", "{seen}");
    assert_eq!(seen["free"], false, "{seen}");
    // `lease ls` shows the session live and the keys it owns.
    let listed = lease_ok(lease(&settings, "owned/").args(["ls", "--json"]));
    let sessions = &listed["sessions"];
    assert_eq!(sessions[0]["session"], "owned/sessions/a", "{listed}");
    assert_eq!(sessions[0]["live"], true, "{listed}");
    assert_eq!(
        sessions[0]["owns"],
        serde_json::json!(["owned/tenants/1", "owned/tenants/2"]),
        "{listed}"
    );
    let rows = listed["leases"].as_array().expect("rows");
    let owned_rows: Vec<_> = rows.iter().filter(|r| r["owned_by"].is_object()).collect();
    assert_eq!(owned_rows.len(), 2, "{listed}");
    assert!(owned_rows.iter().all(|r| r["held"] == true), "{listed}");
    // An operator breaks the session: both keys are free at once. The
    // session renews every second, so a renewal may land between the
    // inspect and the break: the break then says the lease changed, and
    // the operator inspects again, as it asks.
    let mut attempts = 0;
    loop {
        let seen = lease_ok(lease(&settings, "owned/sessions/a").args(["inspect", "--json"]));
        let etag = seen["etag"].as_str().expect("an etag").to_string();
        let (code, _, out) = lease_json(
            lease(&settings, "owned/sessions/a").args(["break", "--etag", &etag, "--json"]),
        );
        attempts += 1;
        if code == 0 {
            break;
        }
        assert!(
            out.contains(r#""error":"changed""#) && attempts < 10,
            "break: exit {code}: {out}"
        );
    }
    for key in ["owned/tenants/1", "owned/tenants/2"] {
        let got = lease_ok(lease(&settings, key).args(["acquire", "--ttl", "3s", "--json"]));
        assert_eq!(got["lease"]["token"], 2, "{key}: {got}");
    }
    // The session learns at its next renewal: it owns nothing after.
    std::thread::sleep(Duration::from_secs(2));
    assert!(session.owned().is_empty(), "{:?}", session.owned());
    session.close();
    renewing.join().expect("the campaign ends");
}
