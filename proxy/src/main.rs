//! The `dptext-proxy` command.
//!
//! ```sh
//! dptext-proxy --config proxy.toml        # serve
//! dptext-proxy check proxy.toml           # validate the file and the upstream
//! ```

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dptext_proxy::masking::{self, Probe};
use dptext_proxy::upstream::Login;
use tikv_jemallocator::Jemalloc;

/// The allocator. Sessions allocate and free their catalogs, parse trees
/// and rows from the runtime's and the sanitizer's threads; glibc's malloc
/// kept what they had freed: 256 proxy-mode sessions took the proxy (a
/// debug build) from
/// 43 to 617 MiB, still 596 MiB 30 s after they closed. Bounding its
/// arenas (MALLOC_ARENA_MAX=1 or 2) or its mmap and trim thresholds left
/// 480-590 MiB: the memory was freed but fragmented, and glibc hands back
/// only the top of a heap. jemalloc, with its background thread purging
/// freed pages (below), went back to 125 MiB and stayed there round after
/// round (mimalloc: 173-326 MiB, and 115 MiB at rest instead of 45).
#[global_allocator]
static GLOBAL: Jemalloc = Jemalloc;

#[derive(Parser)]
#[command(
    name = "dptext-proxy",
    version,
    about = "PostgreSQL proxy that maps each client user to its own upstream login, masked users to roles the database masks"
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
    /// Validates a configuration file, logs in as every user's upstream
    /// role and runs the masking check for the masked ones.
    Check {
        /// The file.
        file: PathBuf,
    },
}

/// Lists the text columns without a rule that a masked user's role may
/// read: raw to it, or refused when `dptext.deny_unlabelled_text` is on.
async fn report_unlabelled(up: &dptext_proxy::config::Upstream, login: &Login) {
    match masking::unlabelled_text(up, login).await {
        Ok((cols, _)) if cols.is_empty() => {}
        Ok((cols, deny)) => {
            let shown: Vec<&str> = cols.iter().take(20).map(String::as_str).collect();
            let more = if cols.len() > shown.len() {
                format!(" and {} more", cols.len() - shown.len())
            } else {
                String::new()
            };
            if deny {
                println!(
                    "  note: {} text column(s) without a dptext rule are refused to it (dptext.deny_unlabelled_text is on): {}{more}",
                    cols.len(),
                    shown.join(", ")
                );
            } else {
                println!(
                    "  warning: {} text column(s) without a dptext rule are read raw by it: {}{more}; label them (MASKED WITH a rule, or ALLOW if safe) or set dptext.deny_unlabelled_text = on for the role",
                    cols.len(),
                    shown.join(", ")
                );
            }
        }
        Err(e) => println!("  note: could not list its unlabelled text columns: {e}"),
    }
}

/// Prints what a session of each user would get; fails when any masked
/// user would be refused or any upstream login fails.
async fn check(file: &std::path::Path) -> dptext_proxy::Result<()> {
    let c = dptext_proxy::load_config(file)?;
    println!("{}: syntax and values ok", file.display());
    let up = &c.upstream;
    println!(
        "upstream {}:{} database \"{}\"",
        up.host, up.port, up.dbname
    );
    println!(
        "{}",
        dptext_proxy::mode::describe(&c.masking, &c.rules, &c.sanitized)
    );
    let proxy_mode = c.masking.mode == dptext_proxy::mode::Mode::Proxy;
    if proxy_mode {
        // Builds every rule: a bad rule or a missing asset shows here.
        let rules = dptext_proxy::mode::column_rules(&c.rules)?;
        dptext_proxy::sanitize::Sanitizer::check(&c.masking, &rules)?;
        println!("proxy mode: {} rule(s) built", rules.len());
    }
    let mut refused = 0;
    for u in &c.users {
        let login = Login::of(u);
        let head = format!(
            "user \"{}\" ({}) -> upstream role \"{}\"",
            u.name,
            if u.masked { "masked" } else { "unmasked" },
            u.upstream_user
        );
        if u.masked && proxy_mode {
            match dptext_proxy::session::catalog::probe(up, &login, &c).await {
                Ok(summary) => println!("{head}: connected; proxy mode: {summary}"),
                Err(e) => {
                    println!("{head}: REFUSED: {e}");
                    refused += 1;
                }
            }
            continue;
        }
        let report = if u.masked {
            match masking::check(up, &login, &u.name).await {
                Ok(r) => {
                    println!(
                        "{head}: connected; masked and keyed (dptext {}, key {}): ok",
                        r.version,
                        r.key_id.as_deref().unwrap_or("?")
                    );
                    report_unlabelled(up, &login).await;
                    Some(r)
                }
                Err(e) => {
                    println!("{head}: REFUSED: {e}");
                    refused += 1;
                    None
                }
            }
        } else {
            match masking::probe(up, &login).await {
                Ok(Probe::Reported(r)) => {
                    println!("{head}: connected; rows relayed unchanged");
                    if r.masked {
                        println!("  warning: the role is labelled MASKED, so this unmasked user sees masked values");
                    }
                    Some(r)
                }
                Ok(_) => {
                    println!("{head}: connected; rows relayed unchanged");
                    None
                }
                Err(e) => {
                    println!("{head}: FAILED: {e}");
                    refused += 1;
                    None
                }
            }
        };
        let Some(r) = report else { continue };
        if r.superuser {
            println!(
                "  warning: upstream role \"{}\" is a superuser: it can remove labels, read the key and bypass any masking; use a role without superuser",
                u.upstream_user
            );
        }
        if u.masked && r.writable_tables > 0 {
            println!(
                "  warning: upstream role \"{}\" may write {} table(s): a masked role should only read (REVOKE INSERT, UPDATE, DELETE, TRUNCATE)",
                u.upstream_user, r.writable_tables
            );
        }
    }
    if refused > 0 {
        return Err(dptext_proxy::ProxyError::Config(format!(
            "{refused} user(s) could not be served; see above"
        )));
    }
    println!("{} user(s) ok", c.users.len());
    Ok(())
}

async fn run(file: &std::path::Path) -> dptext_proxy::Result<()> {
    let c = dptext_proxy::load_config(file)?;
    if c.key.is_none() {
        tracing::info!("no key: SCRAM salts change when the proxy restarts; set key or DPTEXT_PROXY_KEY to keep them");
    }
    let listen = c.listen.clone();
    let metrics = c.metrics.clone();
    let proxy = dptext_proxy::Proxy::new(c)?;
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    if let Some(m) = metrics {
        let l = tokio::net::TcpListener::bind(&m.listen).await?;
        tracing::info!(listen = %m.listen, "metrics on /metrics");
        tokio::spawn(dptext_proxy::metrics::serve(l));
    }
    // SIGHUP: reload the file; new sessions use it, open ones keep theirs.
    let reload = proxy.clone();
    let path = file.to_path_buf();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP: no reloads");
            return;
        };
        while hup.recv().await.is_some() {
            match dptext_proxy::load_config(&path).and_then(|c| reload.reload(c)) {
                Ok(()) => tracing::info!(file = %path.display(), "configuration reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "reload failed; keeping the previous configuration")
                }
            }
        }
    });
    tracing::info!(%listen, "dptext-proxy listening");
    eprintln!("dptext-proxy listening on {listen}");
    dptext_proxy::serve(listener, proxy).await
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DPTEXT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Freed pages go back to the system after jemalloc's decay time even
    // while the proxy is idle, not only when it next allocates.
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(error = %e, "the allocator's background thread did not start");
    }
    let cli = Cli::parse();
    // The runtime only moves bytes: DPTEXT_PROXY_IO_THREADS sets its
    // threads, default half the cores. On 2 cores shared with PostgreSQL
    // one I/O thread relayed pgbench -S 10-20% faster than two
    // (docs/benchmarks.md).
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
