//! A Lambda Runtime API for the lab's function processes: the part of
//! <https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html> a
//! function built on `lambda_runtime` uses. `GET
//! /2018-06-01/runtime/invocation/next` waits for the next event the lab
//! queues (a schedule tick); `POST .../invocation/{id}/response` and
//! `.../{id}/error` record how the run ended; `POST .../init/error` records
//! a failed start. Each event and each answer is written to the slot's
//! journal as the lab saw it (`invoke`, `response`, `function_error`;
//! `error` is what a job or service notes of its own), with the real
//! time. One listener per function process slot on `127.0.0.1`; one request
//! per connection (`Connection: close`).

use super::proxy::{read_request, Request};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

struct Queue {
    events: Mutex<VecDeque<(String, Value)>>,
    ready: Condvar,
}

/// The Runtime API of one function slot.
pub struct RuntimeApi {
    port: u16,
    queue: Arc<Queue>,
    stop: Arc<AtomicBool>,
    next_id: AtomicU64,
    slot: usize,
    thread: Option<JoinHandle<()>>,
}

impl RuntimeApi {
    /// Listens on a free port of `127.0.0.1`; answers go to `journal`.
    pub fn start(slot: usize, journal: PathBuf) -> Result<RuntimeApi, String> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("runtime API cannot bind: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let queue = Arc::new(Queue {
            events: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queue, stop) = (queue.clone(), stop.clone());
            thread::spawn(move || loop {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (queue, stop, journal) = (queue.clone(), stop.clone(), journal.clone());
                        thread::spawn(move || {
                            let _ = conn.set_nonblocking(false);
                            serve(slot, conn, &queue, &stop, &journal);
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            })
        };
        Ok(RuntimeApi {
            port,
            queue,
            stop,
            next_id: AtomicU64::new(1),
            slot,
            thread: Some(thread),
        })
    }

    /// `AWS_LAMBDA_RUNTIME_API` for the function: `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Queues one event (a tick); a process that is busy or dead picks it
    /// up when it next asks (as Lambda queues asynchronous invocations).
    pub fn invoke(&self, event: Value) {
        let id = format!(
            "lab-{}-{}",
            self.slot,
            self.next_id.fetch_add(1, Ordering::SeqCst)
        );
        self.queue.events.lock().unwrap().push_back((id, event));
        self.queue.ready.notify_all();
    }

    /// Events not handed out yet.
    pub fn pending(&self) -> usize {
        self.queue.events.lock().unwrap().len()
    }

    /// Drops the queued events (a restarted environment starts afresh).
    pub fn clear(&self) {
        self.queue.events.lock().unwrap().clear();
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.queue.ready.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn note(journal: &PathBuf, slot: usize, mut event: Value) {
    event["t"] = json!(super::now_ms());
    event["slot"] = json!(slot);
    let mut line = event.to_string();
    line.push('\n');
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

fn reply(conn: &mut TcpStream, status: u16, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        if status < 300 { "OK" } else { "Error" },
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}

fn serve(slot: usize, mut conn: TcpStream, queue: &Queue, stop: &AtomicBool, journal: &PathBuf) {
    let Ok(Some(Request {
        method, path, body, ..
    })) = read_request(&mut conn)
    else {
        return;
    };
    const BASE: &str = "/2018-06-01/runtime";
    let Some(rest) = path.strip_prefix(BASE) else {
        return reply(&mut conn, 404, &[], b"{}");
    };
    match (method.as_str(), rest) {
        ("GET", "/invocation/next") => {
            let mut events = queue.events.lock().unwrap();
            let (id, event) = loop {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(next) = events.pop_front() {
                    break next;
                }
                events = queue
                    .ready
                    .wait_timeout(events, Duration::from_millis(200))
                    .unwrap()
                    .0;
            };
            drop(events);
            note(journal, slot, json!({"ev": "invoke", "id": id}));
            let deadline = super::now_ms() + 60_000;
            reply(
                &mut conn,
                200,
                &[
                    ("Lambda-Runtime-Aws-Request-Id", id.clone()),
                    ("Lambda-Runtime-Deadline-Ms", deadline.to_string()),
                    (
                        "Lambda-Runtime-Invoked-Function-Arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:lab".into(),
                    ),
                    ("Lambda-Runtime-Trace-Id", format!("Root={id}")),
                ],
                event.to_string().as_bytes(),
            );
        }
        ("POST", rest) if rest.starts_with("/invocation/") => {
            let parts: Vec<&str> = rest.split('/').collect();
            let (id, what) = (
                parts.get(2).copied().unwrap_or_default(),
                parts.get(3).copied().unwrap_or_default(),
            );
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let ev = if what == "response" {
                "response"
            } else {
                "function_error"
            };
            note(journal, slot, json!({"ev": ev, "id": id, "body": body}));
            reply(&mut conn, 202, &[], b"{}");
        }
        ("POST", "/init/error") => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            note(journal, slot, json!({"ev": "init_error", "body": body}));
            reply(&mut conn, 202, &[], b"{}");
        }
        _ => reply(&mut conn, 404, &[], b"{}"),
    }
}
