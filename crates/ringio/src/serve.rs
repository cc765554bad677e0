//! `ringio serve --model M`: the finite-state-machine server.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use clap::builder::PossibleValue;
use clap::ValueEnum;
use ringio_fsm::Model;

use crate::units::parse_whole;

/// `ringio serve`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Protocol: each connection starts in state a; every action byte (0-3 or \
'0'-'3') gets the new state (a-d) as one reply byte, whitespace is ignored, any other byte gets \
'?', and the server closes the connection after replying d. Transitions: a->(a,b,c,d), \
b->(a,a,b,d), c->(a,a,c,d), d->(d,d,d,d) for actions 0,1,2,3.\n\nPrints `listening on ADDR` \
first. SIGINT or SIGTERM stops it with a summary line."
)]
pub struct Args {
    /// The concurrency model.
    #[arg(long, value_name = "MODEL")]
    pub model: ModelArg,
    /// Address to listen on (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090")]
    pub addr: SocketAddr,
    /// Worker threads, for the models that have a pool (tokio): 1 to 1024.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_threads,
          allow_negative_numbers = true)]
    pub threads: usize,
}

/// `--threads`.
fn parse_threads(text: &str) -> Result<usize, String> {
    parse_whole(text, 1, ringio_fsm::MAX_THREADS as u64).map(|n| n as usize)
}

/// clap's view of [`Model`]: the list comes from the enum.
#[derive(Debug, Clone, Copy)]
pub struct ModelArg(pub Model);

impl ValueEnum for ModelArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [ModelArg; Model::ALL.len()] = {
            let mut all = [ModelArg(Model::Sequential); Model::ALL.len()];
            let mut i = 0;
            while i < all.len() {
                all[i] = ModelArg(Model::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.about()))
    }
}

pub fn run(args: &Args) -> Result<i32> {
    if let Some(why) = args.model.0.unavailable() {
        eprintln!("ringio serve: {why}");
        return Ok(2);
    }
    let stop = Arc::new(AtomicBool::new(false));
    crate::signals::stop_on_signals(&stop)?;
    // Servers and load generators hold a socket per client.
    ringio_base::limits::raise_nofile_limit();
    let listener = ringio_fsm::listen(args.addr)
        .map_err(|e| anyhow!("cannot listen on {}: {e}", args.addr))?;
    let local = listener.local_addr()?;
    println!("listening on {local}");
    std::io::stdout().flush()?;
    let model = args.model.0;
    let s = ringio_fsm::serve(model, listener, args.threads, &stop)?;
    eprintln!(
        "ringio serve: {model} stopped: {} connections, {} requests, {} refused, {} errors",
        s.connections, s.requests, s.refused, s.errors
    );
    Ok(0)
}
