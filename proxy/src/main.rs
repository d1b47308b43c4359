//! The `dptext-proxy` command.
//!
//! ```sh
//! dptext-proxy --config proxy.toml        # serve
//! dptext-proxy check proxy.toml           # validate the file and the upstream
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dptext_proxy::config::Config;

#[derive(Parser)]
#[command(
    name = "dptext-proxy",
    version,
    about = "PostgreSQL proxy that sanitizes protected text columns"
)]
struct Cli {
    /// Configuration file (TOML).
    #[arg(long, short)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validates a configuration file and connects to its upstream.
    Check {
        /// The file.
        file: PathBuf,
    },
}

async fn check(file: &std::path::Path) -> dptext_proxy::Result<()> {
    let c = Config::load(file)?;
    println!("{}: syntax and values ok", file.display());
    let mut up = dptext_proxy::upstream::connect(&c.upstream, &[]).await?;
    println!(
        "upstream {}:{} as {}: connected",
        c.upstream.host, c.upstream.port, c.upstream.user
    );
    for r in &c.rules {
        let (s, t) = r.qualified();
        let sql = format!(
            "SELECT 1 FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = '{}' AND c.relname = '{}' AND a.attname = '{}' AND NOT a.attisdropped",
            s.replace('\'', "''"),
            t.replace('\'', "''"),
            r.column.replace('\'', "''")
        );
        match up.query(&sql).await? {
            Ok(rows) if !rows.is_empty() => {
                println!("rule {}.{}: {} ok", r.table, r.column, r.mechanism)
            }
            _ => {
                return Err(dptext_proxy::ProxyError::Config(format!(
                    "rule {}.{}: no such column upstream",
                    r.table, r.column
                )))
            }
        }
    }
    println!(
        "{} user(s), {} rule(s), keyed mode: {}",
        c.users.len(),
        c.rules.len(),
        if c.key.is_some() {
            "on"
        } else {
            "off (set key or DPTEXT_PROXY_KEY)"
        }
    );
    Ok(())
}

async fn run(file: &std::path::Path) -> dptext_proxy::Result<()> {
    let c = Config::load(file)?;
    if c.key.is_none() {
        tracing::warn!("no key: every query draws fresh randomness, so repeated queries can be averaged; set key or DPTEXT_PROXY_KEY");
    }
    let listen = c.listen.clone();
    let metrics = c.metrics.clone();
    let current = dptext_proxy::current(dptext_proxy::shared(c)?);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    if let Some(m) = metrics {
        let l = tokio::net::TcpListener::bind(&m.listen).await?;
        tracing::info!(listen = %m.listen, "metrics on /metrics");
        tokio::spawn(dptext_proxy::metrics::serve(l));
    }
    // SIGHUP: reload the file; new sessions use it, open ones keep theirs.
    let reload = current.clone();
    let path = file.to_path_buf();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP: no reloads");
            return;
        };
        while hup.recv().await.is_some() {
            match Config::load(&path).and_then(dptext_proxy::shared) {
                Ok(s) => {
                    *reload
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = s;
                    tracing::info!(file = %path.display(), "configuration reloaded");
                }
                Err(e) => {
                    tracing::error!(error = %e, "reload failed; keeping the previous configuration")
                }
            }
        }
    });
    tracing::info!(%listen, "dptext-proxy listening");
    eprintln!("dptext-proxy listening on {listen}");
    dptext_proxy::serve(listener, current).await
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DPTEXT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // The runtime only moves bytes (sanitization runs on the worker pool,
    // one thread per core): DPTEXT_PROXY_IO_THREADS sets its threads,
    // default half the cores. On 2 cores shared with PostgreSQL one I/O
    // thread relayed pgbench -S 10-20% faster than two (docs/benchmarks.md).
    let io_threads = std::env::var("DPTEXT_PROXY_IO_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) / 2
        })
        .max(1);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(io_threads);
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dptext-proxy: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match (&cli.command, &cli.config) {
            (Some(Command::Check { file }), _) => check(file).await,
            (None, Some(file)) => run(file).await,
            (None, None) => Err(dptext_proxy::ProxyError::Config(
                "give --config FILE, or `check FILE`".into(),
            )),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dptext-proxy: {e}");
            ExitCode::FAILURE
        }
    }
}
