//! Shard fleets against moto and Azurite (`Leases::shards`, the native
//! transport): members join, one is killed (its task dropped: no
//! release), one joins late, one leaves; the shards are covered and
//! balanced within one each time, and no shard is owned by two members at
//! any sampled instant. The ignored test is the benchmark of
//! `BENCHMARKS.md` ("Shard fleets"): 50 members and 256 shards on
//! serialised moto (`make bench-shards`).

mod support;

use lease_core::client::{ShardEvent, Shards};
use lease_core::{Leases, Settings};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_native::settings::{ReqwestStore, StoreSettings};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

type Member = Shards<ReqwestStore, SystemClock>;
/// Shards seen owned by two members at one sample, and by which.
type Doubles = Arc<Mutex<Vec<(u32, Vec<String>)>>>;

struct Fleet {
    settings: StoreSettings,
    prefix: String,
    shards: u32,
    ttl: Duration,
    members: Vec<(String, Member, tokio::task::JoinHandle<()>)>,
    /// Members killed or leaving: their shards must go to the others (a
    /// killed one's `owns` still counts against two owners until its
    /// deadline).
    gone: Vec<String>,
    /// Shards owned at the same sampled instant by two members (shard,
    /// members), if ever.
    doubles: Doubles,
}

impl Fleet {
    fn new(settings: StoreSettings, shards: u32, ttl: Duration) -> Fleet {
        Fleet {
            settings,
            prefix: format!("fleets/{}", os_entropy().id()),
            shards,
            ttl,
            members: Vec::new(),
            gone: Vec::new(),
            doubles: Arc::default(),
        }
    }

    /// Starts a member: its campaign, and its events answered as a
    /// service would (a revoked shard drained at once).
    fn join(&mut self, name: &str) {
        let leases = Leases::new(
            store(&self.settings),
            SystemClock::new(),
            Settings::new(name).ttl(self.ttl),
            os_entropy,
        )
        .expect("valid settings");
        let (member, campaign) = leases
            .shards(&self.prefix, self.shards, self.ttl / 2)
            .expect("a valid fleet");
        let events = member.clone();
        let task = tokio::spawn(async move {
            let answer = async move {
                while let Some(event) = events.next().await {
                    if let ShardEvent::Revoking { shard, .. } = event {
                        events.drained(shard);
                    }
                }
            };
            let _ = tokio::join!(campaign, answer);
        });
        self.members.push((name.to_string(), member, task));
    }

    /// Each live member's shards now, checking that no shard has two.
    fn owners(&self) -> BTreeMap<String, Vec<u32>> {
        let mut by_shard: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let mut by_member = BTreeMap::new();
        for (name, member, _) in &self.members {
            let owned: Vec<u32> = member.owned().into_iter().map(|(s, _)| s).collect();
            for &s in &owned {
                by_shard.entry(s).or_default().push(name.clone());
            }
            if !self.gone.contains(name) {
                by_member.insert(name.clone(), owned);
            }
        }
        for (shard, names) in by_shard {
            if names.len() > 1 {
                self.doubles.lock().unwrap().push((shard, names));
            }
        }
        by_member
    }

    /// Waits (sampling every 50 ms) until every shard is owned by a live
    /// member and the counts are within one; the time it took.
    async fn settled(&self, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let owners = self.owners();
            let counts: Vec<usize> = owners.values().map(Vec::len).collect();
            let covered: usize = counts.iter().sum();
            let (lo, hi) = (
                counts.iter().min().copied().unwrap_or(0),
                counts.iter().max().copied().unwrap_or(0),
            );
            if covered == self.shards as usize && hi <= lo + 1 {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "not settled within {limit:?}: {owners:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills member `name`: its task dropped, nothing released.
    fn kill(&mut self, name: &str) {
        let (_, _, task) = self
            .members
            .iter()
            .find(|(n, ..)| n == name)
            .expect("a member");
        task.abort();
        self.gone.push(name.to_string());
    }

    fn leave(&mut self, name: &str) {
        let (_, member, _) = self
            .members
            .iter()
            .find(|(n, ..)| n == name)
            .expect("a member");
        member.leave();
        self.gone.push(name.to_string());
    }

    fn doubles(&self) -> Vec<(u32, Vec<String>)> {
        self.doubles.lock().unwrap().clone()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Times of a fleet's moves on the store `settings` reach: (start, a
/// member killed, a member joined, a member left), each until the fleet
/// is covered and balanced again.
fn moves(settings: StoreSettings, members: usize, shards: u32, ttl: Duration) -> [Duration; 4] {
    runtime().block_on(async {
        let mut fleet = Fleet::new(settings, shards, ttl);
        let limit = ttl * 12;
        for i in 0..members {
            fleet.join(&format!("m{i:02}"));
        }
        let start = fleet.settled(limit * 2).await;
        fleet.kill("m00");
        let killed = fleet.settled(limit).await;
        // The newcomer has none at first: settled means it got its share.
        fleet.join("late");
        let joined = fleet.settled(limit).await;
        fleet.leave("m01");
        let left = fleet.settled(limit).await;
        assert_eq!(fleet.doubles(), Vec::new(), "shards owned twice at once");
        for (name, member, task) in &fleet.members {
            if name != "m00" && name != "m01" {
                member.leave();
            }
            let _ = task;
        }
        for (_, _, task) in fleet.members.drain(..) {
            let _ = tokio::time::timeout(ttl * 4, task).await;
        }
        [start, killed, joined, left]
    })
}

#[test]
fn a_fleet_on_moto_covers_balances_and_moves_its_shards() {
    let (_moto, settings) = moto_and_settings(false);
    let [start, killed, joined, left] = moves(settings, 4, 8, Duration::from_secs(3));
    eprintln!(
        "4 members, 8 shards, ttl 3 s: covered {start:?} after the start, {killed:?} after a kill, {joined:?} after a join, {left:?} after a leave"
    );
}

/// The same fleet's moves on Azurite (its conditional writes, its
/// listing of the members), smaller: 3 members and 8 shards.
#[test]
fn a_fleet_on_azurite_covers_balances_and_moves_its_shards() {
    let azurite = azurite();
    let [start, killed, joined, left] =
        moves(azure_settings(&azurite), 3, 8, Duration::from_secs(3));
    eprintln!(
        "Azurite, 3 members, 8 shards, ttl 3 s: covered {start:?} after the start, {killed:?} after a kill, {joined:?} after a join, {left:?} after a leave"
    );
}

/// `make bench-shards`: 50 members, 256 shards, ttl 6 s, serialised moto
/// (one request at a time): the times BENCHMARKS.md reports.
#[test]
#[ignore = "benchmark: make bench-shards"]
fn fifty_members_and_256_shards_on_serialised_moto() {
    let ttl = Duration::from_secs(6);
    let (_moto, settings) = moto_and_settings(true);
    let [start, killed, joined, left] = moves(settings, 50, 256, ttl);
    println!(
        "50 members, 256 shards, ttl {ttl:?}, serialised moto: covered and balanced {start:?} after the start, {killed:?} after a member was killed, {joined:?} after a member joined, {left:?} after a member left"
    );
}
