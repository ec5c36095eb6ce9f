//! A saved checkpoint that does not decode as the state type the caller asks
//! for is a failure (exit 1), named as such, not a refusal: the caller's
//! request is well-formed, the stored data and the program disagree.
use runlog::engine::{Codec, ErrorChain};
use runlog::run::*;
use serde_json::json;

#[test]
fn a_checkpoint_that_does_not_decode_as_the_asked_type_fails_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let r = Runs::new(d.path()).with_codec(Codec::Binary);
    let fp = InitSpec::parse_fingerprint("size=5").unwrap();
    let got = r
        .restore::<serde_json::Value>("job", "t", fp.clone(), StopFlag::new())
        .unwrap();
    got.checkpoints
        .checkpoint(&json!({"offset": "not a number"}))
        .unwrap();
    drop(got);

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct State {
        offset: u64,
    }
    let e = r
        .restore::<State>("job", "t", fp, StopFlag::new())
        .unwrap_err();
    assert!(
        matches!(e, RunError::Checkpoint { ref id, .. } if id == "job"),
        "{e:?}"
    );
    assert!(!e.is_refused());
    assert_eq!(e.exit_code(), 1);
    let text = ErrorChain(&e).to_string();
    assert!(
        text.starts_with("run job: the saved checkpoint does not decode as the state asked for: "),
        "{text}"
    );
    assert!(
        text.ends_with("invalid type: string \"not a number\", expected u64"),
        "the decoder's reason follows: {text}"
    );
}
