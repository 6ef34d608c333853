//! Describes memcached's command-line options and finds the ones the operator manages.
//!
//! memcached parses its arguments with `getopt_long`: short options may be bundled (`-vvm64`),
//! a short option's value may be attached (`-m64`) or separate (`-m 64`), and a long option may
//! be abbreviated to any prefix (`--memory-l=64`; an ambiguous prefix is an error). A flag the
//! operator manages, given again in `extraArgs`, would silently override the spec, so every
//! spelling is refused. The same table produces the webhook's check and the CRD's CEL rule, so
//! the two cannot disagree.

/// Whether an option takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A switch: `-d`, `--daemon`.
    None,
    /// A value is required: `-m 64`, `-m64`, `--memory-limit=64`, `--memory-limit 64`.
    Required,
    /// A long form may carry `=value`: `--verbose=2`.
    Optional,
}

/// One memcached command-line option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemcachedOption {
    /// The short form's letter, if any.
    pub short: Option<char>,
    /// The long form's name, without the leading `--`, if any.
    pub long: Option<&'static str>,
    /// Whether the option takes a value.
    pub arg: Arg,
    /// Where the operator sets this option from, when it manages it.
    pub managed_by: Option<&'static str>,
}

const fn opt(short: char, long: &'static str, arg: Arg) -> MemcachedOption {
    MemcachedOption {
        short: Some(short),
        long: Some(long),
        arg,
        managed_by: None,
    }
}

const fn managed(short: char, long: &'static str, arg: Arg, by: &'static str) -> MemcachedOption {
    MemcachedOption {
        short: Some(short),
        long: Some(long),
        arg,
        managed_by: Some(by),
    }
}

/// memcached 1.6's options, as its `getopt_long` tables declare them.
pub const OPTIONS: &[MemcachedOption] = &[
    managed('p', "port", Arg::Required, "spec.service.port"),
    managed('U', "udp-port", Arg::Required, "the operator (UDP is off)"),
    managed(
        'l',
        "listen",
        Arg::Required,
        "the operator (all pod addresses)",
    ),
    managed(
        'm',
        "memory-limit",
        Arg::Required,
        "spec.memcached.memoryLimitMB",
    ),
    managed(
        'c',
        "conn-limit",
        Arg::Required,
        "spec.memcached.maxConnections",
    ),
    managed('t', "threads", Arg::Required, "spec.memcached.threads"),
    managed(
        'I',
        "max-item-size",
        Arg::Required,
        "spec.memcached.maxItemSize",
    ),
    managed('v', "verbose", Arg::Optional, "spec.memcached.verbosity"),
    opt('s', "unix-socket", Arg::Required),
    opt('a', "unix-mask", Arg::Required),
    opt('A', "enable-shutdown", Arg::None),
    opt('d', "daemon", Arg::None),
    opt('r', "enable-coredumps", Arg::None),
    opt('u', "user", Arg::Required),
    opt('M', "disable-evictions", Arg::None),
    opt('k', "lock-memory", Arg::None),
    opt('h', "help", Arg::None),
    opt('i', "license", Arg::None),
    opt('V', "version", Arg::None),
    opt('P', "pidfile", Arg::Required),
    opt('f', "slab-growth-factor", Arg::Required),
    opt('n', "slab-min-size", Arg::Required),
    opt('L', "enable-largepages", Arg::None),
    MemcachedOption {
        short: Some('D'),
        long: None,
        arg: Arg::Required,
        managed_by: None,
    },
    opt('R', "max-reqs-per-event", Arg::Required),
    opt('C', "disable-cas", Arg::None),
    opt('b', "listen-backlog", Arg::Required),
    opt('B', "protocol", Arg::Required),
    opt('S', "enable-sasl", Arg::None),
    opt('F', "disable-flush-all", Arg::None),
    opt('X', "disable-dumping", Arg::None),
    opt('W', "disable-watch", Arg::None),
    managed('Y', "auth-file", Arg::Required, "spec.auth"),
    managed(
        'e',
        "memory-file",
        Arg::Required,
        "spec.memcached.warmRestart",
    ),
    managed('Z', "enable-ssl", Arg::None, "spec.tls"),
    opt('o', "extended", Arg::Required),
    opt('N', "napi-ids", Arg::Required),
];

/// A managed option found in `extraArgs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedFlag {
    /// Position in `extraArgs`.
    pub index: usize,
    /// The argument as given.
    pub arg: String,
    /// The option it sets (`--memory-limit`, or `-m` when it has no long form).
    pub option: String,
    /// Where the operator sets that option from.
    pub managed_by: &'static str,
}

/// Returns every argument that sets, or may set, an option the operator manages.
///
/// Each argument is judged on its own, as the CRD's CEL rule judges it: an argument that is
/// only the value of the previous option (`-u`, `-m`) is still refused. That errs on the side
/// of refusing nonsense rather than letting a managed flag through.
pub fn managed_flags(extra_args: &[String]) -> Vec<ManagedFlag> {
    extra_args
        .iter()
        .enumerate()
        .filter_map(|(index, arg)| {
            managed_option_in(arg).map(|option| ManagedFlag {
                index,
                arg: arg.clone(),
                option: display_name(option),
                managed_by: option.managed_by.unwrap_or_default(),
            })
        })
        .collect()
}

fn display_name(option: &MemcachedOption) -> String {
    match (option.long, option.short) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => String::new(),
    }
}

/// The managed option an argument sets, if it sets one.
fn managed_option_in(arg: &str) -> Option<&'static MemcachedOption> {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split_once('=').map_or(long, |(name, _)| name);
        if name.is_empty() {
            return None; // "--" ends the options
        }
        return long_candidates(name).find(|o| o.managed_by.is_some());
    }
    let bundle = arg.strip_prefix('-')?;
    for letter in bundle.chars() {
        let option = OPTIONS.iter().find(|o| o.short == Some(letter))?;
        if option.managed_by.is_some() {
            return Some(option);
        }
        if option.arg != Arg::None {
            return None; // the rest of the argument is this option's value
        }
    }
    None
}

/// The options a long name may mean: the exact match if there is one, else every option the
/// name abbreviates (more than one is ambiguous, which memcached refuses, and so do we).
fn long_candidates(name: &str) -> impl Iterator<Item = &'static MemcachedOption> {
    let exact = OPTIONS.iter().find(|o| o.long == Some(name));
    let abbreviated = OPTIONS
        .iter()
        .filter(move |o| exact.is_none() && o.long.is_some_and(|long| long.starts_with(name)));
    exact.into_iter().chain(abbreviated)
}

/// The RE2 pattern that matches an argument setting a managed option, for the CRD's CEL rule.
pub fn managed_flag_pattern() -> String {
    let switches: String = OPTIONS
        .iter()
        .filter(|o| o.arg == Arg::None && o.managed_by.is_none())
        .filter_map(|o| o.short)
        .collect();
    let managed_letters: String = OPTIONS
        .iter()
        .filter(|o| o.managed_by.is_some())
        .filter_map(|o| o.short)
        .collect();
    let long_names: Vec<String> = OPTIONS
        .iter()
        .filter(|o| o.managed_by.is_some())
        .filter_map(|o| o.long)
        .map(any_prefix_of)
        .collect();
    format!(
        "^(-[{switches}]*[{managed_letters}]|--({})(=.*)?$)",
        long_names.join("|")
    )
}

/// An RE2 pattern matching any non-empty prefix of `name`: `p(?:o(?:r(?:t)?)?)?`.
///
/// Correct only while no prefix of a managed name is itself the full name of an option the
/// operator leaves alone (an exact name beats an abbreviation); a test guards that.
fn any_prefix_of(name: &str) -> String {
    let mut pattern = String::new();
    for (i, letter) in name.chars().enumerate() {
        if i > 0 {
            pattern.push_str("(?:");
        }
        pattern.push(letter);
    }
    pattern.push_str(&")?".repeat(name.chars().count().saturating_sub(1)));
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        managed_flags(&args).into_iter().map(|f| f.option).collect()
    }

    #[test]
    fn every_spelling_of_a_managed_flag_is_found() {
        for arg in [
            "-m",
            "-m64",
            "--memory-limit",
            "--memory-limit=64",
            "--memory-l=64",
            "-dm64",
            "-vv",
            "-vvv",
            "--verbose",
            "--verbose=2",
            "--verb",
            "-p11212",
            "--po=1",
            "-U0",
            "--ud=0",
            "-l127.0.0.1",
            "--listen=127.0.0.1",
            "-t8",
            "--th=8",
            "-c10",
            "--c=10",
            "--co=10",
            "-I2m",
            "--max-i=2m",
            "-kI2m",
        ] {
            assert_eq!(found(&[arg]).len(), 1, "{arg} should be refused");
        }
    }

    #[test]
    fn ambiguous_abbreviations_that_could_mean_a_managed_flag_are_refused() {
        assert_eq!(found(&["--mem=64"]), vec!["--memory-limit"]);
        assert_eq!(found(&["--lis=0.0.0.0"]), vec!["--listen"]);
        assert_eq!(found(&["--m=64"]), vec!["--memory-limit"]);
    }

    #[test]
    fn options_the_operator_leaves_alone_pass() {
        let args = [
            "-M",
            "--disable-evictions",
            "-o",
            "modern,-m",
            "-B",
            "ascii",
            "-Bbinary",
            "--listen-backlog=2048",
            "-b1024",
            "--slab-growth-factor=1.1",
            "-f1.1",
            "-R40",
            "--max-reqs-per-event=40",
            "-ohashpower=20",
            "--",
            "plain",
        ];
        assert_eq!(found(&args), Vec::<String>::new());
    }

    #[test]
    fn tls_the_auth_file_and_the_memory_file_are_the_specs_to_set() {
        assert_eq!(
            found(&[
                "-Z",
                "--auth-file=/etc/users",
                "-e/dev/shm/items",
                "--enable-s"
            ]),
            [
                "--enable-ssl",
                "--auth-file",
                "--memory-file",
                "--enable-ssl"
            ]
        );
    }

    #[test]
    fn a_value_attached_to_a_short_option_is_not_read_as_flags() {
        assert_eq!(found(&["-Bm"]), Vec::<String>::new());
        assert_eq!(found(&["-o", "maxconns_fast"]), Vec::<String>::new());
    }

    #[test]
    fn findings_name_the_position_and_the_owning_field() {
        let args = vec!["-M".to_string(), "--threads=8".to_string()];
        let flags = managed_flags(&args);
        assert_eq!(flags.len(), 1);
        assert_eq!(flags[0].index, 1);
        assert_eq!(flags[0].managed_by, "spec.memcached.threads");
    }

    #[test]
    fn no_abbreviation_of_a_managed_name_is_another_options_full_name() {
        for managed in OPTIONS.iter().filter(|o| o.managed_by.is_some()) {
            let long = managed.long.unwrap_or_default();
            for other in OPTIONS.iter().filter(|o| o.managed_by.is_none()) {
                let name = other.long.unwrap_or_default();
                assert!(
                    name.is_empty() || !long.starts_with(name),
                    "--{name} is both an option and an abbreviation of --{long}"
                );
            }
        }
    }

    #[test]
    fn any_prefix_patterns_nest_optional_groups() {
        assert_eq!(any_prefix_of("port"), "p(?:o(?:r(?:t)?)?)?");
        assert_eq!(any_prefix_of("a-b"), "a(?:-(?:b)?)?");
    }

    #[test]
    fn every_managed_option_has_a_short_and_a_long_form() {
        for option in OPTIONS.iter().filter(|o| o.managed_by.is_some()) {
            assert!(
                option.short.is_some() && option.long.is_some(),
                "{option:?}"
            );
        }
    }

    #[test]
    fn no_two_options_share_a_letter_or_a_name() {
        for (i, a) in OPTIONS.iter().enumerate() {
            for b in &OPTIONS[i + 1..] {
                assert!(a.short.is_none() || a.short != b.short, "{a:?} {b:?}");
                assert!(a.long.is_none() || a.long != b.long, "{a:?} {b:?}");
            }
        }
    }
}
