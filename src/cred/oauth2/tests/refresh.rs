//! `with_token`: one fetch, reuse until the margin, exactly one refresh on a 401 with a
//! cached token, never a second.

use super::*;
use std::cell::Cell;

/// A token endpoint that issues `tok-1`, `tok-2`, ... with `expires_in` 60, and an
/// API that only accepts tokens in `live`.
struct World {
    clock: Cell<Duration>,
    base: Instant,
    fetches: Cell<u32>,
    calls: Cell<u32>,
    live: std::cell::RefCell<Vec<String>>,
    cache: TokenCache,
}

impl World {
    fn new() -> World {
        World {
            clock: Cell::new(Duration::ZERO),
            base: Instant::now(),
            fetches: Cell::new(0),
            calls: Cell::new(0),
            live: Default::default(),
            cache: TokenCache::new(),
        }
    }

    /// One API call; returns the token the API accepted (or the 401 it gave).
    fn call(&mut self) -> Result<Result<String, String>, TokenError> {
        let (clock, base, fetches, calls, live) = (&self.clock, self.base, &self.fetches, &self.calls, &self.live);
        with_token(
            &mut self.cache,
            "api",
            || base + clock.get(),
            || {
                fetches.set(fetches.get() + 1);
                let name = format!("tok-{}", fetches.get());
                live.borrow_mut().push(name.clone());
                parse_token_response(200, &ok_body(&name, "60"))
            },
            |t| {
                calls.set(calls.get() + 1);
                Ok(if live.borrow().iter().any(|l| l == t.secret()) {
                    Reply::Accepted(Ok(t.secret().to_owned()))
                } else {
                    Reply::Unauthorized(Err(t.secret().to_owned()))
                })
            },
        )
    }
}

#[test]
fn first_call_fetches_second_reuses_expiry_refetches() {
    let mut w = World::new();
    assert_eq!(w.call().unwrap(), Ok("tok-1".into()));
    assert_eq!(w.fetches.get(), 1);
    w.clock.set(Duration::from_secs(53)); // fresh for 60 - 6 = 54 s
    assert_eq!(w.call().unwrap(), Ok("tok-1".into()));
    assert_eq!(w.fetches.get(), 1);
    w.clock.set(Duration::from_secs(54));
    assert_eq!(w.call().unwrap(), Ok("tok-2".into()));
    assert_eq!(w.fetches.get(), 2);
    assert_eq!(w.calls.get(), 3);
}

#[test]
fn a_revoked_token_triggers_exactly_one_refresh() {
    let mut w = World::new();
    assert_eq!(w.call().unwrap(), Ok("tok-1".into()));
    w.live.borrow_mut().clear(); // the API revokes tok-1
    assert_eq!(w.call().unwrap(), Ok("tok-2".into()));
    assert_eq!((w.fetches.get(), w.calls.get()), (2, 3));
    assert_eq!(w.call().unwrap(), Ok("tok-2".into()));
    assert_eq!(w.fetches.get(), 2);
}

#[test]
fn an_api_that_always_says_401_costs_one_refresh_per_call_at_most() {
    let mut w = World::new();
    w.call().unwrap().unwrap();
    // From now on the API refuses every token, old or new.
    let mut answers = Vec::new();
    for _ in 0..3 {
        let before = w.fetches.get();
        let r = with_token(
            &mut w.cache,
            "api",
            || w.base + w.clock.get(),
            || {
                w.fetches.set(w.fetches.get() + 1);
                parse_token_response(200, &ok_body(&format!("tok-{}", w.fetches.get()), "60"))
            },
            |t| Ok::<_, TokenError>(Reply::Unauthorized(t.secret().to_owned())),
        )
        .unwrap();
        answers.push((r, w.fetches.get() - before));
    }
    // cached tok-1 refused -> one refresh (tok-2) refused -> the 401 is the answer;
    // tok-2 is cached, so the next call refreshes once too, and so on.
    assert_eq!(answers, [("tok-2".into(), 1), ("tok-3".into(), 1), ("tok-4".into(), 1)]);
}

#[test]
fn a_401_with_a_token_fetched_for_this_call_is_not_refreshed_again() {
    let mut cache = TokenCache::new();
    let fetches = Cell::new(0);
    let t0 = Instant::now();
    let r = with_token(
        &mut cache,
        "api",
        || t0,
        || {
            fetches.set(fetches.get() + 1);
            Ok::<_, TokenError>(token("fresh", Some(60)))
        },
        |_| Ok(Reply::Unauthorized(401)),
    );
    assert_eq!((r, fetches.get()), (Ok(401), 1));
}

#[test]
fn a_failed_fetch_is_returned_and_nothing_is_cached() {
    let mut cache = TokenCache::new();
    let t0 = Instant::now();
    let r: Result<(), TokenError> =
        with_token(&mut cache, "api", || t0, || parse_token_response(401, br#"{"error":"invalid_client"}"#), |_| panic!("no API call without a token"));
    assert_eq!(r.unwrap_err(), TokenError::Status { status: 401, error: Some("invalid_client".into()) });
    assert!(cache.get("api", t0).is_none());
}
