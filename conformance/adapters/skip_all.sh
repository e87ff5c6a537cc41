#!/bin/sh
# A conformance adapter that implements nothing (conformance/protocol.md).
#
# It answers hello, answers "skipped" to every other request, and exits on
# bye or at the end of its input. It shows that an adapter needs no JSON
# library and no particular language: a POSIX shell, sed and printf will
# do. Run against it, the harness must report NOT CONFORMANT, every
# required case counted as skipped:
#
#     ocf conformance --impl "sh conformance/adapters/skip_all.sh"

# The value of a JSON field: an unsigned integer ("id") or a string of
# lower-case letters ("op"), which is all this adapter needs to know.
field() {
    printf '%s\n' "$1" | sed -n \
        -e "s/.*\"$2\"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p" \
        -e "t" \
        -e "s/.*\"$2\"[[:space:]]*:[[:space:]]*\"\([a-z]*\)\".*/\1/p"
}

while IFS= read -r line; do
    id=$(field "$line" id)
    case $(field "$line" op) in
    hello)
        printf '{"id": %s, "result": "hello", "name": "skip-all-shell", "version": "1.0", "protocol": 1, "ops": ["read", "write"], "features": []}\n' "$id"
        ;;
    bye)
        exit 0
        ;;
    *)
        printf '{"id": %s, "result": "skipped", "reason": "skip-all-shell implements nothing"}\n' "$id"
        ;;
    esac
done
