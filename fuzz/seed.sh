#!/usr/bin/env bash
# Seeds for the cargo-fuzz targets (issue #12): writes fuzz/corpus/<target>/seed-*.
# pipeline: every tests/corpus case with its prelude (as tests/it/corpus.rs feeds it,
# {PORT} = 8080, the port the pipeline target's policy allows), plus allowed calls;
# the other targets: a handful of hand-written inputs each. Idempotent; the committed
# corpus is the minimised result of seeds plus fuzzing (`make fuzz-cmin`).
set -euo pipefail
cd "$(dirname "$0")"
root=..
out=corpus

INIT='{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"corpus","version":"1"}}}'
INITIALIZED='{"jsonrpc":"2.0","method":"notifications/initialized"}'
PROBE='{"jsonrpc":"2.0","id":"probe","method":"ping"}'

seed() { # target name < bytes
    mkdir -p "$out/$1"
    cat >"$out/$1/seed-$2"
}

# ---- pipeline: the malformed-input corpus --------------------------------------------
n=0
while IFS=$'\t' read -r name prelude expect _; do
    case $name in '#'* | '') continue ;; esac
    {
        case $prelude in
            ready) printf '%s\n%s\n' "$INIT" "$INITIALIZED" ;;
            init-only) printf '%s\n' "$INIT" ;;
        esac
        sed 's/{PORT}/8080/g' "$root/tests/corpus/$name.in"
        case $expect in close*) ;; *) printf '%s\n' "$PROBE" ;; esac
    } | seed pipeline "corpus-$name"
    n=$((n + 1))
done <"$root/tests/corpus/cases.tsv"

call() { # id name arguments-json
    printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$1" "$2" "$3"
}
{
    printf '%s\n%s\n' "$INIT" "$INITIALIZED"
    call 1 http_request '{"method":"GET","url":"http://127.0.0.1:8080/api/items"}'
    call 2 http_request '{"method":"POST","url":"http://127.0.0.1:8080/api/x","body":"{}","credential":"tok"}'
    call 3 http_request '{"method":"GET","url":"http://127.0.0.1:8080/public","query":{"q":"1"},"headers":{"Accept":"text/plain"}}'
    call 4 http_request '{"method":"GET","url":"http://127.0.0.1:8080/api/%2e%2e/admin"}'
    call 5 http_request '{"method":"DELETE","url":"http://127.0.0.1:8080/api/x"}'
    call 6 ssh_exec '{"host":"corpus-listed","command":"uptime"}'
    call 7 ssh_exec '{"host":"corpus-listed","command":"cat /var/log/app/a.log"}'
    call 8 ssh_exec '{"host":"corpus-listed","command":"cat /var/log/app/../../etc/shadow.log"}'
    call 9 ssh_exec '{"host":"corpus-listed","command":"systemctl status nginx","timeout_s":5}'
    call 10 sp_inventory '{}'
    printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}'
    printf '%s\n' "$PROBE"
} | seed pipeline allowed-calls

# ---- policy --------------------------------------------------------------------------
seed policy example <"$root/packaging/policy.example.json"
seed policy corpus <<'EOF'
{"credentials": {"corpus": {"source": {"env": "SP_CORPUS_TOKEN"}, "inject": {"bearer": {}}, "hosts": ["127.0.0.1:9"]}},
 "http": {"allow": [{"hosts": ["127.0.0.1:9"], "methods": ["*"], "paths": ["/*"]}]},
 "ssh": {"known_hosts": "/nonexistent/known_hosts", "hosts": {
   "corpus": {"address": "127.0.0.1", "port": 9, "user": "corpus", "auth": {"agent": true}},
   "listed": {"address": "127.0.0.1", "port": 9, "user": "corpus", "auth": {"agent": true}, "commands": ["uptime", "systemctl status *"]}}}}
EOF
seed policy full <<'EOF'
{"mode": "enforce", "audit": {"path": null},
 "credentials": {
   "gh": {"source": {"file": "/run/secrets/gh"}, "inject": {"header": {"name": "X-Api-Key", "format": "token {secret}"}}, "hosts": ["api.github.com"], "paths": ["/repos/*"], "methods": ["GET", "POST"], "on_echo": "withhold"},
   "b": {"source": {"command": ["pass", "show", "b"], "timeout_s": 5}, "inject": {"basic": {}}, "hosts": ["*.example.com:8443"]},
   "q": {"source": {"systemd": "q"}, "inject": {"query": {"name": "key"}}, "hosts": ["[::1]:8080"], "approve": true}},
 "http": {"allow": [{"hosts": ["api.github.com"], "methods": ["GET"], "paths": ["/repos/*", "/user"]}],
          "timeout_s": 10, "max_response_bytes": 1048576, "max_request_body_bytes": 65536, "max_redirects": 2, "https_only": true},
 "ssh": {"known_hosts": "/etc/sp/known_hosts", "host_key_policy": "strict", "timeout_s": 60,
         "hosts": {"web1": {"address": "10.0.0.5", "user": "deploy", "auth": {"key_file": "/etc/sp/id_ed25519"}, "commands": ["cat /var/log/app/*.log"], "hide_address": true, "pty": false}}}}
EOF
printf '{"http": {"allow": [{"hosts": ["a"], "methods": ["GET"], "paths": ["/x/*"]}]}, "credentials": {"a": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}' | seed policy small
printf '{"credentials": 1}' | seed policy bad-type
printf '{"http": {"allow": []}, "http": {}}' | seed policy dup-key
printf '[1,2]' | seed policy not-object

# ---- known_hosts: "HOST PORT" then the file --------------------------------------------
ED1=AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f
ED2=AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g
EC1=AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAABJbmlzdHAyNTYAAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4/QA==
HASHED='|1|AAECAwQFBgcICQoLDA0ODxAREhM=|zKYaAqmSav3Qxr2sffNqWFIcbe4='
printf 'web1.example.com 22\n# comment\nweb1.example.com,10.0.0.5 ssh-ed25519 %s\n*.example.com,!bad.example.com ecdsa-sha2-nistp256 %s host\n' "$ED1" "$EC1" | seed known_hosts plain
printf '127.0.0.1 2222\n%s ssh-ed25519 %s\n[127.0.0.1]:2222 ssh-ed25519 %s\n' "$HASHED" "$ED2" "$ED1" | seed known_hosts hashed
printf 'h 22\n@revoked * ssh-ed25519 %s\n@cert-authority *.example.com ssh-ed25519 %s\nh ssh-ed25519 %s\n[h]:* ssh-ed25519 %s\n' "$ED1" "$ED2" "$ED1" "$ED2" | seed known_hosts markers
printf 'h?st 22\nh?st,[h*]:2? ssh-ed25519 %s\n\n@bogus h ssh-ed25519 x\nh ssh-rsa %s\n' "$ED2" "$ED1" | seed known_hosts malformed

# ---- ssh_command: patterns, one per line, then the command ------------------------------
printf 'systemctl status *\nuptime\ncat /var/log/app/*.log\nsystemctl status nginx.service' | seed ssh_command systemctl
printf 'cat /srv/*.*\ncat /srv/.*\ncat /srv/*..*\ncat /srv/../etc/passwd' | seed ssh_command dotdot
printf 'journalctl -u app -n *\njournalctl --since=*\njournalctl --since=-1h' | seed ssh_command option
printf 'cat *\ncat /srv/*/x\ncat ./d/*\ncat ./d/a/./b' | seed ssh_command relative
printf 'echo a*b*c\necho a-b.c+d=e:f,g@h%%i/jbc' | seed ssh_command stars

# ---- url_path: a URL, or a path tried on http://h.example ----------------------------
for u in '/ok/a%2e/b' '/ok/%2e%2E/x/./y' '/ok/a;b=c/d' '/ok//x//' '/ok/%3F%23%25/x' '/ok/%c3%A9t%C3%a9' \
    "/ok/'()*,=:@!\$&+~" '/ok/x%2525y' '/ok/%7euser?q=%3F&r=%2F' '/ok/../admin' '/ok/%2fadmin' \
    'http://127.0.0.1:8080/ok/x' 'https://[::1]/ok/a..b' 'http://H.Example./OK/x' '/ok/%+9x' '/ok/..;/admin'; do
    printf '%s' "$u" | seed url_path "$(printf '%s' "$u" | cksum | cut -d' ' -f1)"
done

# ---- redactor: the secret, a newline, a position byte, the body ---------------------------
printf 'Tk9-s3cr3t/Val+ue_\xc3\xa9!"<&>\n\x05{"echo":"x","b":"%%41"}' | seed redactor json
printf 'user:pa55word-long\n\x10Authorization: Basic xyz\r\nX: \\u0041&#65;' | seed redactor basic
printf 'apikey:\n\x00<p>body</p>' | seed redactor key
printf 'sk-AAAAbbbbCCCCdddd1234\n\x20line one\nline two %%%% \\\\ && text' | seed redactor long

# ---- upstream_wire: what an upstream writes (answers to ids 1 initialize, 2 tools/list,
# 3 tools/call, whose progress token is 3) ----------------------------------------------
UP_INIT='{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"}}}'
UP_LIST='{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"get.issue","title":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},{"name":"get-issue","inputSchema":{"type":"object"}}],"nextCursor":"c1"}}'
UP_PROGRESS='{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1,"total":2,"message":"half"}}'
UP_CALL='{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"x"},{"type":"image","data":"AA==","mimeType":"image/png"},{"type":"resource","resource":{"uri":"f:///a","text":"t"}},{"type":"resource_link","uri":"f:///b","name":"b"}],"structuredContent":{"a":1},"isError":false}}'
printf '%s\n%s\n%s\n%s\n' "$UP_INIT" "$UP_LIST" "$UP_PROGRESS" "$UP_CALL" | seed upstream_wire good
printf '%s\n{"jsonrpc":"2.0","id":"up-1","method":"sampling/createMessage","params":{}}\n{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}\n{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"video"}]}}\n' "$UP_INIT" | seed upstream_wire requests
printf '%s\n%s\n{"jsonrpc":"2.0","id":"3","result":{}}\n' "$UP_INIT" "$UP_LIST" | seed upstream_wire string-id
printf '%s\n{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"%s","inputSchema":{"type":"object"}}]}}\n{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":false,"isError":true}}\n' "$UP_INIT" "$(printf 'a%.0s' $(seq 1 200))" | seed upstream_wire long-name

echo "seeded: $n corpus cases for pipeline; $(find "$out" -name 'seed-*' | wc -l) seeds in all under fuzz/$out/"
