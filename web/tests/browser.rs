//! The exports as the page calls them, compiled to wasm32 and run in
//! headless Chromium by `wasm-bindgen-test-runner` (`make test-wasm`).
//! JSON crosses the boundary exactly as in the page; errors are thrown.
#![cfg(target_arch = "wasm32")]

use lease_web::Demo;
use serde_json::Value;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn state(demo: &Demo) -> Value {
    serde_json::from_str(&demo.state()).expect("state is JSON")
}

fn holders(demo: &Demo) -> Vec<(usize, u64)> {
    state(demo)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n["holding"]["token"].as_u64().map(|t| (i, t)))
        .collect()
}

fn advance_until(demo: &mut Demo, limit_ms: u32, done: impl Fn(&Demo) -> bool) -> bool {
    for _ in 0..limit_ms / 100 {
        if done(demo) {
            return true;
        }
        demo.advance(100.0).unwrap();
    }
    done(demo)
}

#[wasm_bindgen_test]
fn elects_hands_over_after_a_kill_and_renders_requests() {
    let mut demo = Demo::new(3, 10_000, "cas", false, 1).unwrap();
    assert!(advance_until(&mut demo, 10_000, |d| holders(d).len() == 1));
    let [(leader, token)] = holders(&demo)[..] else {
        unreachable!()
    };
    assert_eq!(token, 1);
    demo.fault("kill", leader as u32, 0.0).unwrap();
    assert!(advance_until(&mut demo, 30_000, |d| {
        matches!(holders(d)[..], [(n, _)] if n != leader)
    }));
    assert_eq!(holders(&demo)[0].1, token + 1);
    assert_eq!(state(&demo)["violations"], serde_json::json!([]));

    // Signing runs in the browser too: the time is the node's, passed in.
    let timeline: Value = serde_json::from_str(&demo.timeline(0)).unwrap();
    let call = timeline
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "call")
        .unwrap();
    let request: Value = serde_json::from_str(
        &demo
            .request(call["i"].as_u64().unwrap() as u32, true)
            .unwrap(),
    )
    .unwrap();
    assert!(request["headers"].as_array().unwrap().iter().any(
        |h| h[0] == "authorization" && h[1].as_str().unwrap().starts_with("AWS4-HMAC-SHA256 ")
    ));
}

#[wasm_bindgen_test]
fn naive_shows_a_violation_with_a_clock_step() {
    let mut demo = Demo::new(3, 10_000, "cas", true, 1).unwrap();
    assert!(advance_until(&mut demo, 10_000, |d| holders(d).len() == 1));
    let (leader, _) = holders(&demo)[0];
    demo.fault("offset", ((leader + 1) % 3) as u32, 25_000.0)
        .unwrap();
    demo.advance(15_000.0).unwrap();
    let violations = state(&demo)["violations"].clone();
    assert!(
        violations.to_string().contains("two holders"),
        "{violations}"
    );
}

#[wasm_bindgen_test]
fn bad_input_is_refused_and_changes_nothing() {
    assert!(Demo::new(9, 10_000, "cas", false, 1).is_err());
    assert!(Demo::new(3, 10_000, "paxos", false, 1).is_err());
    let mut demo = Demo::new(2, 10_000, "epochs", false, 1).unwrap();
    let before = demo.state();
    assert_eq!(
        demo.fault("kill", 5, 0.0).unwrap_err(),
        "there is no node 5"
    );
    assert!(demo.fault("pause", 0, f64::INFINITY).is_err());
    assert!(demo.advance(f64::NAN).is_err());
    assert_eq!(demo.state(), before);
}
