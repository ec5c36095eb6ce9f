#!/usr/bin/env bash
# "keyed" means one thing (issue 21 item 6): table-backed state (`Keyed<M>`,
# `KeyedMachine`, `KeyedState`, `RunKeyed`, "a keyed state", the crash tests'
# keyed machine). A store whose every record and snapshot carries a MAC tag
# (opened with a `Key`) is a *tagged* store; one without is *untagged*.
#
# Renames the code of the second sense across the repository (.rs and .py
# files: src, tests, python, fuzz, benches, examples; identifiers, test names,
# comments, messages) and the files named after it (`git mv`). Prose in *.md
# is edited by hand and is not touched here. On-disk bytes are unchanged: no
# byte constant and no string written to a file contains "keyed".
#
#   scripts/rename-tagged.sh        (from anywhere inside the repository)
#
# Idempotent: every pattern matches only the old words, so a second run
# changes nothing. It ends by listing every "keyed" left in code, for review:
# all of them should be table-backed state (or BLAKE3's keyed mode, or
# "keyed by").
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

# Files named after the tagged sense.
mv_if() { if [ -e "$1" ]; then git mv "$1" "$2"; fi; }
mv_if tests/engine/tamper_keyed_tag.rs tests/engine/tamper_tagged_store.rs
mv_if tests/cli/cli_keyed.rs tests/cli/cli_tagged.rs
for c in binary jsonl; do
    mv_if "tests/fixtures/v2/$c/keyed_digest" "tests/fixtures/v2/$c/tagged_digest"
done
for f in keyed_blocks unkeyed_blocks unkeyed_flipped_block unkeyed_truncated; do
    mv_if "fuzz/corpus/table_decode/$f" "fuzz/corpus/table_decode/${f/keyed/tagged}"
done

# Files whose every "keyed" is table-backed state: only the identifier rules
# (an item of the tagged sense used there) apply to them.
STATE_ONLY='^(src/engine/(keyed|machine|merge|mod)\.rs|src/run/(handle|machine|mod|open|units|view)\.rs|tests/(common|crash|run)/.*|tests/engine/(main|damage_keyed_store|damage_snapshot_fallback_then_compact)\.rs|tests/crash/main\.rs)$'

files=$(git ls-files '*.rs' '*.py' '*.pyi' | grep -v '^scripts/')
for f in $files; do
    [ -f "$f" ] || continue
    grep -qi 'keyed\|keying' "$f" || continue
    if [[ $f =~ $STATE_ONLY ]]; then prose=0; else prose=1; fi
    PROSE=$prose perl -0777 -pe '
        # Identifiers of the tagged sense, wherever they are used.
        s/\bKEYED_FORMAT_VERSION\b/TAGGED_FORMAT_VERSION/g;
        s/\bKEYED_SEGMENT_HEADER_LEN\b/TAGGED_SEGMENT_HEADER_LEN/g;
        s/\bKEYED_SNAPSHOT_HEADER_LEN\b/TAGGED_SNAPSHOT_HEADER_LEN/g;
        s/\bSEG_KEYED_CRC_AT\b/SEG_TAGGED_CRC_AT/g;
        s/\bSNAP_KEYED_PCRC_AT\b/SNAP_TAGGED_PCRC_AT/g;
        s/\bSNAP_KEYED_HCRC_AT\b/SNAP_TAGGED_HCRC_AT/g;
        s/\bTABLE_FLAG_KEYED\b/TABLE_FLAG_TAGGED/g;
        s/\bencode_segment_header_keyed\b/encode_segment_header_tagged/g;
        s/\bencode_snapshot_keyed\b/encode_snapshot_tagged/g;
        s/\bkeyed_field\b/tagged_field/g;
        s/\bkeying\b/tagging/g;
        s/\bcheck_keyed_digest\b/check_tagged_digest/g;
        s/\bkeyed_digest\b/tagged_digest/g;
        s/\bkeyed_digest_v2_store_opens_only_with_its_key\b/tagged_digest_v2_store_opens_only_with_its_key/g;
        s/\bkeyed_blocks\b/tagged_blocks/g;
        s/\bunkeyed_(blocks|flipped_block|truncated)\b/untagged_$1/g;
        s/\bcli_keyed\b/cli_tagged/g;
        s/\btamper_keyed_tag\b/tamper_tagged_store/g;
        s/\btamper_keyed_tag\.rs\b/tamper_tagged_store.rs/g;
        s/\bunkeyed\b/untagged/g;
        s/\bUnkeyed\b/Untagged/g;

        if ($ENV{PROSE}) {
            my $ws = qr{\s+(?://[/!]?\s*)?};
            # "keyed" of table-backed state in files that also use the
            # tagged sense: set aside, restored below.
            s/\bas a keyed(?=${ws}store)/as a \x01STATE\x01/g;
            s/\ba keyed(?=${ws}store${ws}with${ws}a${ws}full${ws}table)/a \x01STATE\x01/g;
            s/\ba keyed(?=${ws}store${ws}is${ws}a${ws}`Store<Keyed)/a \x01STATE\x01/g;
            # A record'"'"'s or snapshot'"'"'s "keyed tag" is its tag.
            s/\bkeyed${ws}(tags?)\b/$1/g;
            s/\bKeyed${ws}tag(s?)\b/Tag$1/g;
            # Every other lowercase "keyed", in words and inside identifiers,
            # except table-backed state, module paths (keyed.rs, keyed::),
            # BLAKE3'"'"'s keyed mode and "keyed by".
            s{(?<![A-Za-z])(?<!new_)(?<!::)(?<!/)(?<!mod )(?<!recovery_)(?<!clean_v2_)(?<!damage_)(?<!kill9_)
              keyed
              (?![A-Za-z])(?!_hash)(?!_blake3)(?!::)(?!\.rs)(?!_recovery_seeds)(?!_table\b)(?!_store\.rs)
              (?!${ws}(?:state|machine|test${ws}machine|BLAKE3|blake3|by)\b)}{tagged}gx;
            s/(?<![A-Za-z])unkeyed(?![A-Za-z])/untagged/g;
            s/\x01STATE\x01/keyed/g;
        }
    ' "$f" >"$f.rename-tagged"
    # Rewritten only when changed, so a second run leaves every file (and its
    # mtime) as it was.
    if cmp -s "$f" "$f.rename-tagged"; then rm "$f.rename-tagged"; else
        cat "$f.rename-tagged" >"$f" && rm "$f.rename-tagged"
    fi
done

# "tagged" is a letter longer than "keyed": lines may need rewrapping.
cargo fmt
(cd fuzz && cargo fmt)

echo "rename-tagged: \"keyed\" left in code outside the table-state files, for review" >&2
echo "(each should be table-backed state, BLAKE3's keyed mode or \"keyed by\"):" >&2
git grep -n -E '(^|[^A-Za-z])keyed([^A-Za-z]|$)' -- '*.rs' '*.py' '*.pyi' |
    STATE_ONLY=$STATE_ONLY awk -F: '$1 !~ ENVIRON["STATE_ONLY"]' |
    grep -v -E 'keyed (state|machine|test machine|BLAKE3|by )|new_keyed|keyed_hash|keyed_blake3|keyed::|mod keyed|keyed\.rs' >&2 || true
