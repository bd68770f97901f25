//! The optional OTLP copy (`audit.otlp`): each row, once written, as an OpenTelemetry
//! log record POSTed (OTLP/HTTP, JSON encoding) to the collector's `/v1/logs`.
//!
//! ```text
//!  Journal::write ── try_send(row) ──> bounded queue (QUEUE rows) ──> sender thread
//!       │ (never waits)      └─ full: dropped += 1                     └─ batch of up to BATCH rows,
//!       v                                                                 one POST (TIMEOUT), 2xx: sent
//!   the call goes on                                                      else: dropped += batch, pause
//! ```
//!
//! No async runtime: one background thread per `sp mcp` process with a bounded
//! channel. The protocol loop only enqueues (`try_send`: a full queue drops the row
//! and counts it), so a collector that is down, slow or blackholed never blocks or
//! slows a call: the row is on its way while the loop writes the answer. The file is
//! the record; this copy is best effort. A failed POST drops its batch (counted),
//! warns once per outage and pauses the thread for [`PAUSE`] (rows arriving meanwhile
//! are dropped when the queue fills). At exit the queue is given [`DRAIN`] to empty;
//! then the counts (sent, dropped, left undelivered) are logged when any row was lost.
//!
//! ureq is built as the executors build theirs where it matters: no proxy from the
//! environment, no redirects; the URL is the operator's, so no destination check.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::policy::audit::OtlpConfig;

/// Rows waiting for the sender at most.
const QUEUE: usize = 1024;
/// Rows per POST at most.
const BATCH: usize = 128;
/// One POST, connection included.
const TIMEOUT: Duration = Duration::from_secs(3);
/// After a failed POST.
const PAUSE: Duration = Duration::from_secs(1);
/// How long the exit waits for the queue to empty.
const DRAIN: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Counts {
    queued: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
}

pub(super) struct Otlp {
    tx: Option<SyncSender<String>>,
    done: Receiver<()>,
    counts: Arc<Counts>,
    endpoint: String,
    warned_full: bool,
}

impl Otlp {
    pub(super) fn new(c: &OtlpConfig) -> Otlp {
        let (tx, rx) = mpsc::sync_channel::<String>(QUEUE);
        let (done_tx, done) = mpsc::channel();
        let counts = Arc::new(Counts::default());
        let endpoint = c.endpoint.clone();
        let thread_counts = Arc::clone(&counts);
        let thread_endpoint = endpoint.clone();
        let spawned = std::thread::Builder::new().name("sp-otlp".into()).spawn(move || {
            sender(&rx, &thread_endpoint, &thread_counts);
            let _ = done_tx.send(());
        });
        let tx = match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                log::warn!("OTLP copy: cannot start its thread: {e}; rows are not copied");
                None
            }
        };
        log::info!("OTLP copy of the journal to {endpoint}");
        Otlp { tx, done, counts, endpoint, warned_full: false }
    }

    /// Queues the row as written; never waits.
    pub(super) fn send(&mut self, line: &str) {
        self.counts.queued.fetch_add(1, Ordering::Relaxed);
        let Some(tx) = &self.tx else {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        match tx.try_send(line.to_owned()) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
                if !self.warned_full {
                    self.warned_full = true;
                    log::warn!(
                        "OTLP copy to {}: the queue is full ({QUEUE} rows); rows are dropped and counted (the journal file has every row)",
                        self.endpoint
                    );
                }
            }
        }
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has sent what is queued.
        if self.tx.take().is_some() && matches!(self.done.recv_timeout(DRAIN), Err(RecvTimeoutError::Timeout)) {
            log::warn!("OTLP copy to {}: the collector did not take the last rows within {} s", self.endpoint, DRAIN.as_secs());
        }
        let c = &self.counts;
        let (queued, sent, dropped) = (c.queued.load(Ordering::Relaxed), c.sent.load(Ordering::Relaxed), c.dropped.load(Ordering::Relaxed));
        let left = queued.saturating_sub(sent + dropped);
        if dropped + left > 0 {
            log::warn!("OTLP copy to {}: {sent} row(s) sent, {dropped} dropped, {left} undelivered at exit", self.endpoint);
        } else {
            log::info!("OTLP copy to {}: {sent} row(s) sent", self.endpoint);
        }
    }
}

/// The thread: batches from the queue, one POST each, until the queue is closed.
fn sender(rx: &Receiver<String>, endpoint: &str, counts: &Counts) {
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .user_agent(concat!("sallyport/", env!("CARGO_PKG_VERSION")))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut failing = false;
    while let Ok(first) = rx.recv() {
        let mut lines = vec![first];
        while lines.len() < BATCH {
            match rx.try_recv() {
                Ok(l) => lines.push(l),
                Err(_) => break,
            }
        }
        let n = lines.len() as u64;
        let records: Vec<Value> = lines
            .iter()
            .filter_map(|l| match crate::json::parse(l) {
                Ok(Value::Object(fields)) => Some(super::export::log_record(l, &fields)),
                _ => None,
            })
            .collect();
        let body = super::export::logs_request(records).to_string();
        let result = agent.post(endpoint).header("content-type", "application/json").send(body.as_bytes());
        let why = match result {
            Ok(r) if r.status().is_success() => {
                counts.sent.fetch_add(n, Ordering::Relaxed);
                if failing {
                    failing = false;
                    log::info!("OTLP copy to {endpoint}: the collector takes rows again");
                }
                continue;
            }
            Ok(r) => format!("the collector answered {}", r.status()),
            Err(e) => e.to_string(),
        };
        counts.dropped.fetch_add(n, Ordering::Relaxed);
        if !failing {
            failing = true;
            log::warn!(
                "OTLP copy to {endpoint}: {why}; {n} row(s) dropped, rows are dropped and counted until it takes them again (the journal file has every row)"
            );
        }
        std::thread::sleep(PAUSE);
    }
}
