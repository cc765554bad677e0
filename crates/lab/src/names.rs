//! Command-line names of the lab's enums (their `FromStr` comes from strum).

/// The error for a name that is none of `known`: it names the kind of thing and lists the
/// choices, e.g. `unknown method 'x' (choose from: rw, bigbuf, ...)`.
pub(crate) fn unknown<'a>(what: &str, name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let known: Vec<&str> = known.collect();
    format!(
        "unknown {what} '{name}' (choose from: {})",
        known.join(", ")
    )
}
