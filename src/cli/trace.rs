//! Records `tracing` spans as Chrome "Trace Event Format" complete events (`"ph": "X"`), the
//! JSON that Perfetto and chrome://tracing open. Installed by `main` only for
//! `dynaspa profile --trace`, so other commands pay nothing for the runtime's trace-level spans.
//!
//! One event per enter/exit pair, on the entering thread: a span entered on several worker
//! threads shows up once per thread, and events of one thread nest like the calls did.

use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Beyond this many events the recorder counts instead of storing, so a long profile cannot
/// exhaust memory; the count is reported in the file and on the console.
const MAX_EVENTS: usize = 2_000_000;

/// The shared event store: the layer writes into it, `profile` turns it into the file.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Store>>,
    start: Instant,
}

struct Store {
    events: Vec<Value>,
    dropped: usize,
}

/// The `tracing_subscriber` layer feeding a [`Recorder`].
pub struct ChromeLayer {
    rec: Recorder,
}

/// Per-span state kept in the registry's extensions.
struct SpanState {
    args: Map<String, Value>,
    /// Open enters: (thread, time); a span can be entered on several threads at once.
    open: Vec<(u64, Instant)>,
}

fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

struct ArgVisitor<'a>(&'a mut Map<String, Value>);

impl Visit for ArgVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), json!(value));
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder { inner: Arc::new(Mutex::new(Store { events: Vec::new(), dropped: 0 })), start: Instant::now() }
    }

    pub fn layer(&self) -> ChromeLayer {
        ChromeLayer { rec: self.clone() }
    }

    fn micros(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.start).as_nanos() as f64 / 1e3
    }

    fn push(&self, ev: Value) {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if s.events.len() < MAX_EVENTS {
            s.events.push(ev);
        } else {
            s.dropped += 1;
        }
    }

    /// (events stored, events dropped past the cap).
    pub fn counts(&self) -> (usize, usize) {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (s.events.len(), s.dropped)
    }

    /// The trace file's bytes, events sorted by start time; `about` lands in `otherData`.
    pub fn to_json(&self, about: Map<String, Value>) -> Vec<u8> {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut events = s.events.clone();
        events.sort_by(|a, b| a["ts"].as_f64().unwrap_or(0.0).total_cmp(&b["ts"].as_f64().unwrap_or(0.0)));
        let mut other = about;
        other.insert("dropped_events".into(), json!(s.dropped));
        let doc = json!({ "traceEvents": events, "displayTimeUnit": "ms", "otherData": other });
        serde_json::to_vec(&doc).unwrap_or_default()
    }
}

impl<S> Layer<S> for ChromeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut args = Map::new();
        attrs.record(&mut ArgVisitor(&mut args));
        span.extensions_mut().insert(SpanState { args, open: Vec::new() });
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(st) = ext.get_mut::<SpanState>() {
            values.record(&mut ArgVisitor(&mut st.args));
        }
    }

    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(st) = ext.get_mut::<SpanState>() {
            st.open.push((thread_number(), Instant::now()));
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        let end = Instant::now();
        let Some(span) = ctx.span(id) else { return };
        let tid = thread_number();
        let (start, args) = {
            let mut ext = span.extensions_mut();
            let Some(st) = ext.get_mut::<SpanState>() else { return };
            let Some(pos) = st.open.iter().rposition(|&(t, _)| t == tid) else { return };
            (st.open.remove(pos).1, st.args.clone())
        };
        let meta = span.metadata();
        let ts = self.rec.micros(start);
        self.rec.push(json!({
            "name": meta.name(),
            "cat": meta.target(),
            "ph": "X",
            "ts": ts,
            "dur": (self.rec.micros(end) - ts).max(0.0),
            "pid": 1,
            "tid": tid,
            "args": args,
        }));
    }
}
