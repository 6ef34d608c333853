//! Reads memcached's auth file exactly as memcached 1.6 reads it (`authfile.c`), and says
//! whether the operator accepts it: what memcached would refuse, and what it would read
//! otherwise than written, is refused with the line and the reason.
//!
//! memcached reads the file with `fgets` into lines of at most 255 bytes, newline included.
//! Each line must hold a `:` before its end: the user is what precedes the first `:`, the
//! password what follows it up to `\n`, `\r` or a NUL byte. A line without `:` (a blank line
//! among them) makes the whole file malformed: memcached exits when it starts with it, and
//! keeps its previous credentials when it rereads it on SIGHUP, without a word. memcached
//! reads no more than 8 lines. A line longer than 254 bytes and its newline is cut at 255
//! bytes, and memcached then stops reading: the rest of the password and every later line
//! are ignored; so is every line after a NUL byte. A `\r` before 255 bytes ends the password,
//! and whatever follows it on the line is ignored; a `\r` in the 255th byte leaves the line's
//! `\n` for a line of its own, which is malformed.
//!
//! [`read`] says what memcached loads; [`check`] is the operator's verdict, shared by the
//! sidecars (which authenticate with the first credentials and never have memcached reread
//! a file it would refuse) and admission.

use std::fmt;

/// The most credentials memcached reads.
pub const MAX_ENTRIES: usize = 8;
/// The longest line memcached reads at once, its newline included (`MAX_ENTRY_LEN - 1`).
pub const MAX_LINE_BYTES: usize = 255;
/// The largest auth file the operator accepts: eight lines of the longest length.
pub const MAX_FILE_BYTES: usize = MAX_ENTRIES * MAX_LINE_BYTES;

/// One user and password, as memcached compares them (bytes, not text).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user.
    pub user: Vec<u8>,
    /// The password.
    pub password: Vec<u8>,
}

impl fmt::Debug for Credentials {
    /// The user only: a password never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &String::from_utf8_lossy(&self.user))
            .finish_non_exhaustive()
    }
}

/// What memcached loads from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// memcached refuses the file: line `line` (counted from 1) has no `:`.
    Malformed {
        /// The line memcached found malformed, as it counts lines.
        line: usize,
    },
    /// memcached loads these credentials, in order.
    Loaded {
        /// The credentials.
        entries: Vec<Credentials>,
        /// How many bytes memcached read past or never read, other than the newlines (`\n`
        /// or `\r\n`) that end passwords: what follows a `\r` inside a line, a NUL, a cut
        /// line, or the eighth line.
        unread: usize,
    },
}

/// The bytes of `rest` (what follows a password) other than one line ending at its start.
fn beyond_line_ending(rest: &[u8]) -> usize {
    let ending = if rest.starts_with(b"\r\n") {
        2
    } else {
        usize::from(rest.starts_with(b"\n"))
    };
    rest.len() - ending
}

/// Reads `content` as memcached 1.6 does.
pub fn read(content: &[u8]) -> Read {
    let mut entries = Vec::new();
    let mut unread = 0;
    let mut position = 0;
    let mut line = 0;
    while position < content.len() {
        line += 1;
        // fgets: at most 255 bytes, up to and including a newline.
        let rest = &content[position..];
        let limit = rest.len().min(MAX_LINE_BYTES);
        let taken = rest[..limit]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(limit, |newline| newline + 1);
        let chunk = &rest[..taken];
        position += taken;
        // The scan stops at the NUL fgets writes after the chunk, or at one in the file.
        let byte = |i: usize| chunk.get(i).copied().unwrap_or(0);
        let mut colon = None;
        for i in 0..=chunk.len() {
            match byte(i) {
                0 => break,
                b':' => {
                    colon = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(colon) = colon else {
            return Read::Malformed { line };
        };
        let end = (colon + 1..=chunk.len())
            .find(|&i| matches!(byte(i), b'\n' | b'\r' | 0))
            .unwrap_or(chunk.len());
        entries.push(Credentials {
            user: chunk[..colon].to_vec(),
            password: chunk[colon + 1..end].to_vec(),
        });
        if entries.len() == MAX_ENTRIES || byte(end) == 0 {
            // memcached stops: the rest of the file is never read.
            unread += beyond_line_ending(&content[position - taken + end..]);
            break;
        }
        // memcached goes on with the next line: what this one held after the password's end
        // is skipped.
        unread += beyond_line_ending(&chunk[end..]);
    }
    Read::Loaded { entries, unread }
}

/// Why the operator refuses an auth file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Larger than eight lines of the longest length.
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// memcached refuses it: the line has no `:` (a blank line, or no separator).
    Malformed {
        /// The line, counted from 1.
        line: usize,
        /// Whether the line is blank.
        blank: bool,
    },
    /// A line, its newline included, is longer than memcached reads at once.
    LongLine {
        /// The line, counted from 1.
        line: usize,
        /// Its length, without its newline.
        bytes: usize,
    },
    /// More lines than memcached reads.
    TooManyLines {
        /// How many.
        lines: usize,
    },
    /// A NUL byte, which ends what memcached reads.
    Nul {
        /// The line, counted from 1.
        line: usize,
    },
    /// A `\r` other than a line's last byte before its `\n`: memcached ends the password there.
    CarriageReturn {
        /// The line, counted from 1.
        line: usize,
    },
    /// No credentials at all: memcached would refuse every client.
    Empty,
    /// memcached would load other credentials than the lines say, for a reason none of the
    /// others names (none is known: the tests look for one).
    Misread,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooLarge { bytes } => write!(
                f,
                "{bytes} bytes exceed {MAX_FILE_BYTES}, the most memcached reads ({MAX_ENTRIES} \
                 lines of at most {MAX_LINE_BYTES} bytes)"
            ),
            Refusal::Malformed { line, blank: true } => write!(
                f,
                "line {line} is blank; memcached refuses a file with a blank line (at start it \
                 exits; on a reload it keeps the old credentials)"
            ),
            Refusal::Malformed { line, blank: false } => write!(
                f,
                "line {line} has no ':'; every line must be user:password, which memcached \
                 requires (at start it exits; on a reload it keeps the old credentials)"
            ),
            Refusal::LongLine { line, bytes } => write!(
                f,
                "line {line} is {bytes} bytes long; memcached reads at most {} bytes of a line \
                 and ignores the rest of the file after a longer one",
                MAX_LINE_BYTES - 1
            ),
            Refusal::TooManyLines { lines } => write!(
                f,
                "{lines} lines; memcached reads the first {MAX_ENTRIES} and ignores the others"
            ),
            Refusal::Nul { line } => write!(
                f,
                "line {line} holds a NUL byte, where memcached stops reading the file"
            ),
            Refusal::CarriageReturn { line } => write!(
                f,
                "line {line} holds a carriage return other than before its newline; memcached \
                 ends the password there"
            ),
            Refusal::Empty => f.write_str(
                "holds no credentials; memcached would refuse every client (one \
                 user:password a line)",
            ),
            Refusal::Misread => f.write_str(
                "memcached would load other credentials than its lines say (one user:password a \
                 line, at most 254 bytes each)",
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The operator's verdict on an auth file: the credentials memcached loads, in order, when
/// memcached reads the file exactly as written; else the first reason it does not.
pub fn check(content: &[u8]) -> Result<Vec<Credentials>, Refusal> {
    if content.len() > MAX_FILE_BYTES {
        return Err(Refusal::TooLarge {
            bytes: content.len(),
        });
    }
    // The file as written: lines split at newlines (a last line may lack one).
    let body = content.strip_suffix(b"\n").unwrap_or(content);
    let lines: Vec<&[u8]> = if content.is_empty() {
        Vec::new()
    } else {
        body.split(|&b| b == b'\n').collect()
    };
    let terminated = content.ends_with(b"\n");
    for (index, text) in lines.iter().enumerate() {
        let line = index + 1;
        // A carriage return may end a line only before its newline.
        let content = match text.strip_suffix(b"\r") {
            Some(stripped) if terminated || index + 1 < lines.len() => stripped,
            _ => text,
        };
        if content.contains(&0) {
            return Err(Refusal::Nul { line });
        }
        if content.contains(&b'\r') {
            return Err(Refusal::CarriageReturn { line });
        }
        // fgets reads 255 bytes, the line's terminator included.
        if text.len() + 1 > MAX_LINE_BYTES {
            return Err(Refusal::LongLine {
                line,
                bytes: text.len(),
            });
        }
        if !content.contains(&b':') {
            return Err(Refusal::Malformed {
                line,
                blank: content.iter().all(u8::is_ascii_whitespace),
            });
        }
    }
    if lines.len() > MAX_ENTRIES {
        return Err(Refusal::TooManyLines { lines: lines.len() });
    }
    match read(content) {
        Read::Loaded { entries, unread: 0 } if entries.len() == lines.len() => {
            if entries.is_empty() {
                Err(Refusal::Empty)
            } else {
                Ok(entries)
            }
        }
        // Every way memcached reads a file otherwise than written is refused above; this is
        // the proof's last line.
        _ => Err(Refusal::Misread),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(user: &str, password: &str) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    // Each case below was run against memcached 1.6.18 (Debian 12) with `-Y FILE` and its
    // outcome is what memcached did: exit with "has a malformed entry", or which credentials
    // authenticate (tests/e2e/auth_file.rs repeats them against the memcached installed).
    // 1.6.18 also drops the last byte of a one-line file without a newline ("a:bc"
    // authenticates "a b"), which the newer authfile.c this module follows (a buffer two
    // bytes larger than the file) does not.

    #[test]
    fn memcached_reads_lines_of_user_colon_password() {
        assert_eq!(
            read(b"a:bc\nd:ef:g\n"),
            Read::Loaded {
                entries: vec![creds("a", "bc"), creds("d", "ef:g")],
                unread: 0
            }
        );
        assert_eq!(
            read(b"a:bc\r\nd:ef\r\n"),
            Read::Loaded {
                entries: vec![creds("a", "bc"), creds("d", "ef")],
                unread: 0
            }
        );
        assert_eq!(
            read(b"a:bc"),
            Read::Loaded {
                entries: vec![creds("a", "bc")],
                unread: 0
            }
        );
        assert_eq!(
            read(b""),
            Read::Loaded {
                entries: vec![],
                unread: 0
            }
        );
    }

    #[test]
    fn memcached_refuses_a_blank_line_or_a_line_without_a_colon() {
        assert_eq!(read(b"a:bc\n\n"), Read::Malformed { line: 2 });
        assert_eq!(read(b"\na:bc\n"), Read::Malformed { line: 1 });
        assert_eq!(read(b"abc\n"), Read::Malformed { line: 1 });
        assert_eq!(read(b"a:b\r\n\r\n"), Read::Malformed { line: 2 });
    }

    #[test]
    fn memcached_cuts_a_long_line_and_stops_reading() {
        let x = |n| "x".repeat(n);
        // 254 bytes and a newline: read whole.
        let fits = format!("a:{}\nd:ef\n", x(252));
        assert_eq!(
            read(fits.as_bytes()),
            Read::Loaded {
                entries: vec![creds("a", &x(252)), creds("d", "ef")],
                unread: 0
            }
        );
        // 255 bytes: the password whole, the newline and the next line ignored.
        let longer = format!("a:{}\nd:ef\n", x(253));
        assert_eq!(
            read(longer.as_bytes()),
            Read::Loaded {
                entries: vec![creds("a", &x(253))],
                unread: 5
            }
        );
        // 256 bytes: the password cut short.
        let longest = format!("a:{}\nd:ef\n", x(254));
        assert_eq!(
            read(longest.as_bytes()),
            Read::Loaded {
                entries: vec![creds("a", &x(253))],
                unread: 7
            }
        );
        // 254 bytes and CR LF: the LF is a line of its own, malformed.
        let crlf = format!("a:{}\r\nd:ef\r\n", x(252));
        assert_eq!(read(crlf.as_bytes()), Read::Malformed { line: 2 });
    }

    #[test]
    fn memcached_reads_eight_lines_and_stops_at_a_nul() {
        let nine: String = (0..9).map(|i| format!("u{i}:p\n")).collect();
        match read(nine.as_bytes()) {
            Read::Loaded { entries, unread } => {
                assert_eq!(entries.len(), 8);
                assert_eq!(entries[7], creds("u7", "p"));
                assert_eq!(unread, 5, "the line u8:p");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            read(b"a:b\0c\nd:e\n"),
            Read::Loaded {
                entries: vec![creds("a", "b")],
                unread: 7
            }
        );
        assert_eq!(
            read(b"a:b\rc\nd:e\n"),
            Read::Loaded {
                entries: vec![creds("a", "b"), creds("d", "e")],
                unread: 3
            }
        );
        assert_eq!(read(b"a\0:b\n"), Read::Malformed { line: 1 });
    }

    #[test]
    fn the_operator_accepts_exactly_what_memcached_reads_as_written() {
        assert_eq!(
            check(b"app:s3cret\nops:t0p\n"),
            Ok(vec![creds("app", "s3cret"), creds("ops", "t0p")])
        );
        assert_eq!(check(b"app:s3cret"), Ok(vec![creds("app", "s3cret")]));
        assert_eq!(check(b"app:s3cret\r\n"), Ok(vec![creds("app", "s3cret")]));
        let eight: String = (0..8).map(|i| format!("u{i}:p\n")).collect();
        assert_eq!(check(eight.as_bytes()).map(|c| c.len()), Ok(8));
        let longest = format!("a:{}\n", "x".repeat(252));
        assert!(check(longest.as_bytes()).is_ok());
    }

    #[test]
    fn what_memcached_refuses_or_misreads_is_refused_naming_the_line() {
        let x = |n| "x".repeat(n);
        for (content, expected) in [
            (b"a:b\n\n".to_vec(), "line 2 is blank"),
            (b"a:b\n  \nc:d\n".to_vec(), "line 2 is blank"),
            (b"a:b\nc\n".to_vec(), "line 2 has no ':'"),
            (
                format!("a:{}\n", x(253)).into_bytes(),
                "line 1 is 255 bytes long",
            ),
            (
                format!("a:b\na:{}\r\n", x(252)).into_bytes(),
                "line 2 is 255 bytes long",
            ),
            (
                (0..9)
                    .map(|i| format!("u{i}:p\n"))
                    .collect::<String>()
                    .into_bytes(),
                "9 lines",
            ),
            (b"a:b\0c\n".to_vec(), "line 1 holds a NUL byte"),
            (b"a:b\rc\n".to_vec(), "line 1 holds a carriage return"),
            (Vec::new(), "holds no credentials"),
            (b"\n".to_vec(), "line 1 is blank"),
            (vec![b'a'; MAX_FILE_BYTES + 1], "exceed 2040"),
        ] {
            let refusal = check(&content).expect_err(expected).to_string();
            assert!(refusal.contains(expected), "{expected}: {refusal}");
        }
    }

    #[test]
    fn what_the_operator_accepts_memcached_reads_whole() {
        // Every file of the alphabet below up to a length: accepted means memcached loads
        // one entry per line, nothing unread, nothing cut.
        let alphabet = [b'a', b':', b'\n', b'\r', 0];
        let mut files: Vec<Vec<u8>> = vec![Vec::new()];
        let mut level: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..7 {
            level = level
                .iter()
                .flat_map(|file| {
                    alphabet.iter().map(move |&byte| {
                        let mut next = file.clone();
                        next.push(byte);
                        next
                    })
                })
                .collect();
            files.extend(level.iter().cloned());
        }
        let mut accepted = 0;
        for file in files {
            let verdict = check(&file);
            assert_ne!(
                verdict,
                Err(Refusal::Misread),
                "{file:?}: a reason is missing"
            );
            if let Ok(entries) = verdict {
                let lines = file
                    .strip_suffix(b"\n")
                    .unwrap_or(&file)
                    .split(|&b| b == b'\n')
                    .count();
                assert_eq!(
                    read(&file),
                    Read::Loaded {
                        entries: entries.clone(),
                        unread: 0
                    },
                    "{file:?}"
                );
                assert_eq!(entries.len(), lines, "{file:?}");
                accepted += 1;
            }
        }
        assert!(accepted > 100, "only {accepted} files accepted");
    }

    #[test]
    fn a_password_never_reaches_debug_output() {
        let shown = format!("{:?}", creds("app", "s3cret"));
        assert!(
            shown.contains("app") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
