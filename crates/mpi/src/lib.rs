//! ringio-mpi: `ringio cp --mpi`, one copy spread over the ranks of an MPI job.
//!
//! * [`protocol`]: work stealing and Dijkstra–Safra termination as a pure state machine.
//! * [`sim`]: a discrete-event simulator that drives the same state machine with thousands of
//!   virtual ranks, random message delays and a metadata-server model.
//! * [`wire`]: the wire format, all of it: messages, the work items they carry, lockstep
//!   bundles.
//! * `runtime` (cargo feature `mpi`): each rank runs ringio-copy's engine on its share of the
//!   tree and exchanges work with the others over MPI.
#![deny(missing_docs)]

pub mod protocol;
#[cfg(feature = "mpi")]
pub mod runtime;
pub mod sim;
pub mod wire;

/// The launcher variables that give the number of processes of this job step: OpenMPI's,
/// PMI's (MPICH, Intel MPI, `srun`), and Slurm's per-step count (not `SLURM_NTASKS`, which is
/// the whole allocation's).
pub const LAUNCHER_SIZE_VARS: [&str; 3] =
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];

/// A launcher variable saying more than one process was started, as (name, count), read with
/// `var`. A world of one rank beside it means the binary and the launcher belong to different
/// MPI implementations: every process would copy the whole tree on its own.
pub fn launched_as_many(var: impl Fn(&str) -> Option<String>) -> Option<(&'static str, u64)> {
    LAUNCHER_SIZE_VARS.iter().find_map(|&name| {
        let n: u64 = var(name)?.trim().parse().ok()?;
        (n > 1).then_some((name, n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_counts_are_read() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(launched_as_many(env(&[])), None);
        assert_eq!(launched_as_many(env(&[("PMI_SIZE", "1")])), None);
        assert_eq!(launched_as_many(env(&[("SLURM_NTASKS", "8")])), None);
        assert_eq!(
            launched_as_many(env(&[("PMI_SIZE", "4")])),
            Some(("PMI_SIZE", 4))
        );
        assert_eq!(
            launched_as_many(env(&[("OMPI_COMM_WORLD_SIZE", "2")])),
            Some(("OMPI_COMM_WORLD_SIZE", 2))
        );
    }
}
