//! The pool step (every protocol the store carries, see the crate docs):
//! two runs in a pool of two seats hold both at once, a third is skipped
//! and writes nothing, and a later run takes a freed seat with the next
//! token.
//!
//! The two runs and the checks run on one task ([`join`]). The jobs wait
//! for each other on a [`Gate`], not on the clock: on a virtual clock a
//! sleep moves time, and the holds' own timers would then jump to their
//! renewals (or, for the mutex, which has no renewal, to the deadline).

use crate::{describe, Fail, Run, Step};
use lease_core::client::{join, seat_key};
use lease_core::{Clock, Etag, LeaseRecord, Leases, Run as LeaseRun, RunOutcome, Store};
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// The pool's size.
const SEATS: u32 = 2;

/// A flag one job raises and another waits for, on one task.
#[derive(Default)]
struct Gate {
    open: Cell<bool>,
    waiting: RefCell<Vec<Waker>>,
}

impl Gate {
    fn open(&self) {
        self.open.set(true);
        for waker in self.waiting.take() {
            waker.wake();
        }
    }

    async fn opened(&self) {
        poll_fn(|cx| {
            if self.open.get() {
                return Poll::Ready(());
            }
            self.waiting.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// What the store held at both seats while a and b ran.
type Seats = Vec<(Etag, LeaseRecord)>;

impl<'s, S: Store + 'static, C: Clock + Clone + 'static> Run<'s, S, C> {
    /// a and b run in a pool of two at `<key>.pool` at once, each in a seat
    /// of its own (checked on the store while both jobs run); c's run
    /// meanwhile is skipped and changes no seat; once both are done, both
    /// seats are free and c runs in one, with a token above its last.
    pub(crate) async fn pool(&mut self) -> Result<(), Fail> {
        let pool = format!("{}.pool", self.key);
        let [a, b, c] =
            ["a", "b", "c"].map(|holder| self.client(holder, self.options.ttl, Step::Pool));
        let (a, b, c) = (a?, b?, c?);
        for client in [&a, &b, &c] {
            // The store was probed at the lifecycle's key: its verdict, read.
            client
                .check_store(&self.key)
                .await
                .map_err(|e| (Step::Pool, format!("a client's check of the store: {e}")))?;
        }
        let (a_in, done) = (Gate::default(), Gate::default());
        let a_token = Cell::new(0);
        // A run that ends before its job (an error) opens its gate too:
        // the other's job then fails its checks instead of waiting on.
        let a_runs = async {
            let job = |token| {
                a_token.set(token);
                a_in.open();
                async {
                    done.opened().await;
                    Ok::<_, String>(())
                }
            };
            let ran = Box::pin(a.run(&pool, LeaseRun::new().pool(SEATS), job)).await;
            a_in.open();
            ran
        };
        let (this, c, pool, a_in, a_token, done) = (&*self, &c, &pool, &a_in, &a_token, &done);
        let b_runs = async {
            let job = |token| async move {
                a_in.opened().await;
                let judged = this.while_both_run(c, pool, a_token.get(), token).await;
                done.open();
                judged.map_err(|(_, why)| why)
            };
            let ran = Box::pin(b.run(pool, LeaseRun::new().pool(SEATS), job)).await;
            done.open();
            ran
        };
        let (ran_a, ran_b) = join(a_runs, b_runs).await;
        let seat = |holder: &str, ran| match ran {
            Ok(RunOutcome::Ran {
                seat: Some(seat),
                token,
                ..
            }) => Ok((seat, token)),
            other => Err((Step::Pool, format!("{holder}'s run in the pool: {other:?}"))),
        };
        let (seat_a, token_a) = seat("a", ran_a)?;
        let (seat_b, token_b) = seat("b", ran_b)?;
        ensure!(
            seat_a != seat_b && seat_a < SEATS && seat_b < SEATS,
            Step::Pool,
            "a ran in seat {seat_a} and b in seat {seat_b} of {SEATS}"
        );
        for seat in 0..SEATS {
            self.free_at(&seat_key(pool, seat)).await?;
        }
        let again = c.run(pool, LeaseRun::new().pool(SEATS), |token| async move {
            Ok::<_, String>(token)
        });
        let (seat_c, token_c) = match Box::pin(again).await {
            Ok(RunOutcome::Ran {
                seat: Some(seat),
                token,
                ..
            }) => (seat, token),
            other => return Err((Step::Pool, format!("c's run once both left: {other:?}"))),
        };
        let before = if seat_c == seat_a { token_a } else { token_b };
        ensure!(
            !self.protocol.fences() || token_c > before,
            Step::Pool,
            "c's token {token_c} in seat {seat_c} is not above the {before} it had"
        );
        self.free_at(&seat_key(pool, seat_c)).await?;
        self.passed(
            Step::Pool,
            format!(
                "a in seat {seat_a} (token {token_a}) and b in seat {seat_b} (token {token_b}) at once, c skipped; then c in seat {seat_c} (token {token_c})"
            ),
        );
        Ok(())
    }

    /// While a's job (token `a`) and b's (token `b`) both run: each seat
    /// holds one of them, live, at its token; c's run is skipped and
    /// leaves both seats as they were.
    async fn while_both_run(
        &self,
        c: &Leases<&'s S, &'s C>,
        pool: &str,
        a: u64,
        b: u64,
    ) -> Result<(), Fail> {
        let seats = self.seats(pool).await?;
        let mut holders: Vec<(&str, u64)> = seats
            .iter()
            .map(|(_, r)| (r.holder.as_str(), r.token))
            .collect();
        holders.sort_unstable();
        let live = seats.iter().all(|(_, r)| !r.released);
        ensure!(
            live && holders == [("a", a), ("b", b)],
            Step::Pool,
            "while a (token {a}) and b (token {b}) run, the seats hold {}",
            Self::said(&seats)
        );
        let ran = Cell::new(false);
        let skipped = Box::pin(c.run(pool, LeaseRun::new().pool(SEATS), |_| async {
            ran.set(true);
            Ok::<_, String>(())
        }))
        .await;
        match skipped {
            Ok(RunOutcome::Skipped { holder, token, .. })
                if (holder == "a" && token == a) || (holder == "b" && token == b) => {}
            other => {
                return Err((
                    Step::Pool,
                    format!("c's run while both seats are held: {other:?}"),
                ))
            }
        }
        ensure!(
            !ran.get(),
            Step::Pool,
            "c's job ran while both seats were held"
        );
        let after = self.seats(pool).await?;
        let same = after
            .iter()
            .map(|(e, _)| e)
            .eq(seats.iter().map(|(e, _)| e));
        ensure!(
            same,
            Step::Pool,
            "c's skipped run changed the seats: {} then {}",
            Self::said(&seats),
            Self::said(&after)
        );
        Ok(())
    }

    /// The lease record of every seat of `pool`, as the store holds them.
    async fn seats(&self, pool: &str) -> Result<Seats, Fail> {
        let mut seats = Vec::new();
        for seat in 0..SEATS {
            let key = seat_key(pool, seat);
            match self.stored_at(&key, Step::Pool).await? {
                Some(held) => seats.push(held),
                None => return Err((Step::Pool, format!("{key} holds no lease"))),
            }
        }
        Ok(seats)
    }

    /// The store holds no live lease at `key`.
    async fn free_at(&self, key: &str) -> Result<(), Fail> {
        match self.stored_at(key, Step::Pool).await? {
            Some((etag, record)) if !record.released => Err((
                Step::Pool,
                format!("{key} still holds {}", describe(&etag, &record)),
            )),
            _ => Ok(()),
        }
    }

    fn said(seats: &Seats) -> String {
        let said: Vec<String> = seats.iter().map(|(e, r)| describe(e, r)).collect();
        said.join("; ")
    }
}
