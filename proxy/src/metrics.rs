//! Prometheus metrics: process-wide counters and a latency histogram,
//! served as text on `GET /metrics` when `[metrics] listen` is set.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// The counters.
pub struct Metrics {
    /// Sessions accepted.
    pub sessions_total: AtomicU64,
    /// Sessions open now.
    pub sessions_active: AtomicU64,
    /// Sessions refused (limit, authentication, upstream, masking check).
    pub sessions_failed: AtomicU64,
    /// Masked sessions refused because the masking check failed.
    pub masking_refused: AtomicU64,
    /// Queries (simple Query messages, function calls and Sync-terminated
    /// batches).
    pub queries_total: AtomicU64,
    /// Error responses from the upstream.
    pub upstream_errors: AtomicU64,
    latency: [AtomicU64; BUCKETS.len() + 1],
    latency_sum_micros: AtomicU64,
    latency_count: AtomicU64,
}

/// The process's metrics.
pub static METRICS: Metrics = Metrics::new();

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Adds one to a counter.
pub fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    /// All counters at zero.
    pub const fn new() -> Self {
        Metrics {
            sessions_total: AtomicU64::new(0),
            sessions_active: AtomicU64::new(0),
            sessions_failed: AtomicU64::new(0),
            masking_refused: AtomicU64::new(0),
            queries_total: AtomicU64::new(0),
            upstream_errors: AtomicU64::new(0),
            latency: [const { AtomicU64::new(0) }; BUCKETS.len() + 1],
            latency_sum_micros: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
        }
    }

    /// Records one query's latency (first message to ReadyForQuery).
    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BUCKETS.len());
        self.latency[i].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        for (name, kind, help, v) in [
            (
                "dptext_proxy_sessions_total",
                "counter",
                "Client sessions accepted.",
                g(&self.sessions_total),
            ),
            (
                "dptext_proxy_sessions_active",
                "gauge",
                "Client sessions open.",
                g(&self.sessions_active),
            ),
            (
                "dptext_proxy_sessions_failed_total",
                "counter",
                "Sessions that failed to start.",
                g(&self.sessions_failed),
            ),
            (
                "dptext_proxy_masking_refused_total",
                "counter",
                "Masked sessions refused because the upstream could not be shown to mask them.",
                g(&self.masking_refused),
            ),
            (
                "dptext_proxy_queries_total",
                "counter",
                "Queries relayed.",
                g(&self.queries_total),
            ),
            (
                "dptext_proxy_upstream_errors_total",
                "counter",
                "Error responses from the upstream server.",
                g(&self.upstream_errors),
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
            ));
        }
        let name = "dptext_proxy_query_seconds";
        out.push_str(&format!(
            "# HELP {name} Latency of queries, first message to ReadyForQuery.\n# TYPE {name} histogram\n"
        ));
        let mut cumulative = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += g(&self.latency[i]);
            out.push_str(&format!("{name}_bucket{{le=\"{b}\"}} {cumulative}\n"));
        }
        cumulative += g(&self.latency[BUCKETS.len()]);
        out.push_str(&format!("{name}_bucket{{le=\"+Inf\"}} {cumulative}\n"));
        out.push_str(&format!(
            "{name}_sum {}\n{name}_count {}\n",
            g(&self.latency_sum_micros) as f64 / 1e6,
            g(&self.latency_count)
        ));
        out
    }
}

/// Serves `GET /metrics` (any path) on `listener`.
pub async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut buf)).await;
            let body = METRICS.render();
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::new();
        m.observe(std::time::Duration::from_millis(3));
        m.observe(std::time::Duration::from_secs(9));
        let text = m.render();
        assert!(
            text.contains("dptext_proxy_query_seconds_bucket{le=\"0.001\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("dptext_proxy_query_seconds_bucket{le=\"0.005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("dptext_proxy_query_seconds_bucket{le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("dptext_proxy_query_seconds_count 2\n"),
            "{text}"
        );
    }
}
