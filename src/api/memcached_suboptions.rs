//! Finds the `-o` sub-options of memcached that the operator keeps for itself, in whatever
//! argument of `extraArgs` they may sit.
//!
//! memcached reads `-o` (`--extended`) values with `getsubopt`: a comma-separated list of
//! `name` or `name=value` items, each name matched exactly. The operator sets some of them
//! (`ssl_chain_cert`, `ssl_key`, `ssl_ca_cert`, `ssl_verify_mode`), and others would weaken
//! what the spec asks for behind its back: `-o ssl_verify_mode=0` turns client certificates
//! off while the status still says `Require`. So the ones listed in [`RESERVED`] are refused.
//!
//! As for the flags (`memcached_flags`), each argument is judged on its own, as the CRD's CEL
//! rule judges it. A sub-option list may start an argument (the value of a `-o` before it),
//! follow `-o` in a bundle of switches (`-o...`, `-Mo...`), follow `--extended=` or one of
//! its abbreviations, or follow any comma. That refuses a few arguments memcached would read
//! otherwise (a `-u` value named `ssl_user`), never one that carries a reserved sub-option.
//! The same table produces the webhook's check and the CRD's CEL rule, so the two agree.

use super::memcached_flags::{Arg, OPTIONS};

/// How a reserved sub-option's name is matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    /// Every name that starts so (`ssl_`).
    Prefix(&'static str),
    /// This name only.
    Exact(&'static str),
}

/// A sub-option, or a family of them, the operator keeps for itself, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// The name or the prefix.
    pub name: Name,
    /// Why it is refused, and what to use instead.
    pub why: &'static str,
}

/// memcached 1.6's sub-options that `extraArgs` may not set.
pub const RESERVED: &[Reserved] = &[
    Reserved {
        name: Name::Prefix("ssl_"),
        why: "TLS is spec.tls's: the operator sets the certificate, the key, the CA and the \
              verification mode, and the other ssl_ options would weaken or undo them",
    },
    Reserved {
        name: Name::Prefix("ext_"),
        why: "external storage (extstore) writes items to a file outside the item memory, on \
              a disk the operator gives memcached none of",
    },
    Reserved {
        name: Name::Prefix("no_"),
        why: "no_ options turn off what memcached does by default, its own sandbox \
              (no_drop_privileges) among them",
    },
    Reserved {
        name: Name::Prefix("proxy_"),
        why: "the built-in proxy runs Lua code and connects memcached to other servers",
    },
    Reserved {
        name: Name::Exact("modern"),
        why: "it changes defaults the operator's settings are made for",
    },
    Reserved {
        name: Name::Exact("relaxed_privileges"),
        why: "it relaxes memcached's own sandbox",
    },
    Reserved {
        name: Name::Exact("sock_cookie_id"),
        why: "it marks memcached's sockets for packet filters; who may connect is \
              spec.networkPolicy's",
    },
];

impl Name {
    fn matches(self, name: &str) -> bool {
        match self {
            Name::Prefix(prefix) => name.starts_with(prefix),
            Name::Exact(exact) => name == exact,
        }
    }
}

/// A reserved sub-option found in `extraArgs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservedSuboption {
    /// Position in `extraArgs`.
    pub index: usize,
    /// The sub-option's name as given (`ssl_verify_mode`).
    pub name: String,
    /// Why it is refused.
    pub why: &'static str,
}

/// The long option whose value is a sub-option list.
const EXTENDED: &str = "extended";

/// Where sub-option lists may start in `arg`: byte offsets of their first item.
fn list_starts(arg: &str) -> Vec<usize> {
    let mut starts = vec![0];
    if let Some(long) = arg.strip_prefix("--") {
        if let Some((name, _)) = long.split_once('=')
            && !name.is_empty()
            && EXTENDED.starts_with(name)
        {
            starts.push(2 + name.len() + 1);
        }
    } else if let Some(bundle) = arg.strip_prefix('-') {
        for (offset, letter) in bundle.char_indices() {
            if letter == 'o' {
                starts.push(1 + offset + 1);
                break;
            }
            let switch = OPTIONS
                .iter()
                .any(|o| o.short == Some(letter) && o.arg == Arg::None);
            if !switch {
                break;
            }
        }
    }
    starts.extend(arg.match_indices(',').map(|(at, _)| at + 1));
    starts
}

/// Every reserved sub-option `extra_args` may set, in order.
pub fn reserved_suboptions(extra_args: &[String]) -> Vec<ReservedSuboption> {
    let mut found = Vec::new();
    for (index, arg) in extra_args.iter().enumerate() {
        for start in list_starts(arg) {
            let item = arg[start..].split(',').next().unwrap_or_default();
            let name = item.split('=').next().unwrap_or_default();
            if let Some(reserved) = RESERVED.iter().find(|r| r.name.matches(name)) {
                found.push(ReservedSuboption {
                    index,
                    name: name.to_string(),
                    why: reserved.why,
                });
            }
        }
    }
    found
}

/// The RE2 pattern that matches an argument setting a reserved sub-option, for the CRD's CEL
/// rule: a list start ([`list_starts`]), then a reserved name ending at `=`, `,` or the end.
pub fn reserved_suboption_pattern() -> String {
    let switches: String = OPTIONS
        .iter()
        .filter(|o| o.arg == Arg::None)
        .filter_map(|o| o.short)
        .collect();
    let extended = EXTENDED
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i == 0 {
                c.to_string()
            } else {
                format!("(?:{c}")
            }
        })
        .collect::<String>()
        + &")?".repeat(EXTENDED.len() - 1);
    let names: Vec<String> = RESERVED
        .iter()
        .map(|r| match r.name {
            Name::Prefix(prefix) => format!("{prefix}[^,=]*"),
            Name::Exact(exact) => exact.to_string(),
        })
        .collect();
    format!(
        "^(?:-[{switches}]*o|--{extended}=|.*,)?(?:{})(?:[=,]|$)",
        names.join("|")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(args: &[&str]) -> Vec<(usize, String)> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        reserved_suboptions(&args)
            .into_iter()
            .map(|r| (r.index, r.name))
            .collect()
    }

    /// What the CEL rule's pattern says of each argument, with Rust's regex (RE2 syntax).
    fn pattern_refuses(arg: &str) -> bool {
        regex::Regex::new(&reserved_suboption_pattern())
            .expect("the pattern compiles")
            .is_match(arg)
    }

    #[test]
    fn every_place_a_sub_option_list_can_sit_is_looked_at() {
        for (args, name) in [
            (&["-o", "ssl_verify_mode=0"][..], "ssl_verify_mode"),
            (&["-ossl_verify_mode=0"], "ssl_verify_mode"),
            (&["-Mossl_ca_cert=/etc/passwd"], "ssl_ca_cert"),
            (
                &["-MCo", "hashpower=20,ssl_verify_mode=0"],
                "ssl_verify_mode",
            ),
            (&["--extended=no_drop_privileges"], "no_drop_privileges"),
            (&["--ext=modern"], "modern"),
            (&["--extended", "ext_path=/tmp/x:1G"], "ext_path"),
            (
                &["-o", "slab_chunk_max=256,proxy_config=/x.lua"],
                "proxy_config",
            ),
            (&["-o", "modern,hashpower=20"], "modern"),
            (&["-o", "ssl_kernel_tls"], "ssl_kernel_tls"),
            (&["-o", "sock_cookie_id=7"], "sock_cookie_id"),
            (&["-o", "relaxed_privileges"], "relaxed_privileges"),
            (&["-o", "no_modern"], "no_modern"),
        ] {
            assert_eq!(
                found(args).into_iter().map(|(_, n)| n).collect::<Vec<_>>(),
                vec![name.to_string()],
                "{args:?}"
            );
            let refused = args.iter().filter(|a| pattern_refuses(a)).count();
            assert_eq!(refused, 1, "the CEL pattern disagrees on {args:?}");
        }
    }

    #[test]
    fn the_issue_example_is_refused_twice() {
        assert_eq!(
            found(&["-o", "ssl_ca_cert=/etc/passwd,ssl_verify_mode=0"]),
            vec![(1, "ssl_ca_cert".into()), (1, "ssl_verify_mode".into())]
        );
    }

    #[test]
    fn tuning_sub_options_and_other_flags_pass() {
        let args = [
            "-o",
            "modern_x,hashpower=20,slab_chunk_max=256,lru_crawler,idle_timeout=600",
            "-o",
            "maxconns_fast,drop_privileges,track_sizes,read_buf_mem_limit=64",
            "-Bascii",
            "-M",
            "--listen-backlog=2048",
            "-R40",
            // "no" alone, or a name that merely contains a reserved one, is no reserved name.
            "-ono",
            "-o",
            "lru_segmented,hot_lru_pct=20",
        ];
        assert_eq!(found(&args), Vec::new());
        for arg in args {
            assert!(!pattern_refuses(arg), "the CEL pattern refuses {arg}");
        }
    }

    #[test]
    fn a_value_of_another_short_option_is_not_a_list_unless_it_has_commas() {
        // -B's value; memcached would refuse it anyway, but it is not a sub-option list.
        assert_eq!(found(&["-Bssl_x"]), Vec::new());
        assert!(!pattern_refuses("-Bssl_x"));
        // After a comma anything may be a list item: refused, as CEL refuses it.
        assert_eq!(found(&["-Bascii,no_x"]), vec![(0, "no_x".into())]);
        assert!(pattern_refuses("-Bascii,no_x"));
    }

    #[test]
    fn the_pattern_is_the_one_the_crd_carries() {
        assert_eq!(
            reserved_suboption_pattern(),
            "^(?:-[AdrMkhiVLCSFXWZ]*o|--e(?:x(?:t(?:e(?:n(?:d(?:e(?:d)?)?)?)?)?)?)?=|.*,)?\
             (?:ssl_[^,=]*|ext_[^,=]*|no_[^,=]*|proxy_[^,=]*|modern|relaxed_privileges|\
             sock_cookie_id)(?:[=,]|$)"
        );
    }
}
