//! The trust read from the ConfigMap, and the roll's steps.

use super::*;

fn time(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(seconds).expect("a time"))
}

fn read(version: &str, sha256: &str, cas: &[&str]) -> Read {
    Read {
        resource_version: version.into(),
        sha256: sha256.into(),
        cas: cas.iter().map(|ca| ca.to_string()).collect(),
    }
}

#[test]
fn a_withdrawn_ca_starts_a_roll_and_an_added_one_does_not() {
    let first = after_read(None, read("1", "d1", &["one"]), &time(10));
    assert_eq!(first.withdrawn, Some(vec![]));
    assert_eq!(
        first.restarting_since, None,
        "the first read starts nothing"
    );

    let added = after_read(Some(&first), read("2", "d2", &["one", "two"]), &time(20));
    assert_eq!(added.cas, Some(vec!["one".into(), "two".into()]));
    assert_eq!(added.restarting_since, None, "refresh_certs adds a CA");

    let withdrawn = after_read(Some(&added), read("3", "d3", &["two"]), &time(30));
    assert_eq!(withdrawn.withdrawn, Some(vec!["one".into()]));
    assert_eq!(withdrawn.restarting_since, Some(time(30)));
    assert_eq!(withdrawn.sha256.as_deref(), Some("d3"));

    let again = after_read(Some(&withdrawn), read("4", "d3", &["two"]), &time(40));
    assert_eq!(
        again.restarting_since,
        Some(time(30)),
        "same content: the roll goes on"
    );
    let changed = after_read(
        Some(&withdrawn),
        read("5", "d5", &["two", "three"]),
        &time(50),
    );
    assert_eq!(
        (changed.withdrawn, changed.restarting_since),
        (Some(vec!["one".into()]), Some(time(50))),
        "new content while rolling: the roll starts again onto it"
    );
    let back = after_read(
        Some(&withdrawn),
        read("6", "d6", &["one", "two"]),
        &time(60),
    );
    assert_eq!(
        (back.withdrawn, back.restarting_since),
        (Some(vec![]), None),
        "the CA came back: nothing to drop"
    );
}

fn rolling(since: i64) -> ClientCaTrust {
    ClientCaTrust {
        sha256: Some("new".into()),
        withdrawn: Some(vec!["old".into()]),
        restarting_since: Some(time(since)),
        ..ClientCaTrust::default()
    }
}

fn server(ordinal: i32) -> Server {
    Server {
        ordinal,
        serving: true,
        created: Some(time(1)),
        restarts: 2,
        ..Server::default()
    }
}

#[test]
fn servers_are_asked_one_at_a_time_while_the_others_are_ready() {
    let trust = rolling(100);
    let mut servers = vec![server(1), server(0), server(2)];
    assert_eq!(
        next_step(&trust, 3, 1, &servers),
        Step::Ask {
            ordinal: 0,
            sha256: "new".into(),
            restarts: 2
        }
    );
    servers[1].asked = Some("new".into());
    servers[1].restarts_when_asked = Some(2);
    assert_eq!(
        next_step(&trust, 3, 1, &servers),
        Step::Wait("server 0 is restarting".into())
    );
    servers[1].restarts = 3;
    servers[1].serving = false;
    assert_eq!(
        next_step(&trust, 3, 1, &servers),
        Step::Wait("server 0 is not ready".into()),
        "restarted, not ready yet"
    );
    servers[1].serving = true;
    assert_eq!(
        next_step(&trust, 3, 1, &servers),
        Step::Ask {
            ordinal: 1,
            sha256: "new".into(),
            restarts: 2
        }
    );
    assert_eq!(
        next_step(&trust, 3, 0, &servers),
        Step::Wait("the PodDisruptionBudget allows no server down".into())
    );
    servers[0].created = Some(time(200));
    servers[2].asked = Some("older".into());
    servers[2].restarts_when_asked = Some(0);
    assert_eq!(
        next_step(&trust, 3, 1, &servers),
        Step::Ask {
            ordinal: 2,
            sha256: "new".into(),
            restarts: 2
        },
        "a pod created since needs nothing; one asked for older content is asked again"
    );
    servers[2].asked = Some("new".into());
    servers[2].restarts = 3;
    servers[2].restarts_when_asked = Some(2);
    assert_eq!(next_step(&trust, 3, 1, &servers), Step::Done);
    assert_eq!(
        next_step(&ClientCaTrust::default(), 3, 1, &servers),
        Step::Idle
    );
}

#[test]
fn the_budget_is_the_pdb_s_max_unavailable_a_percentage_rounded_up() {
    use crate::api::v1beta1::PodDisruptionBudgetSpec;
    let mut memcached = Memcached::new("cache", Default::default());
    memcached.spec.replicas = Some(3);
    assert_eq!(budget(&memcached), 1);
    for (max, allowed) in [
        (IntOrString::Int(0), 0),
        (IntOrString::Int(2), 2),
        (IntOrString::String("0%".into()), 0),
        (IntOrString::String("10%".into()), 1),
        (IntOrString::String("50%".into()), 2),
    ] {
        memcached.spec.pod_disruption_budget = Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(max.clone()),
        });
        assert_eq!(budget(&memcached), allowed, "{max:?}");
    }
}
