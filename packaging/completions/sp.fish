# fish completion for sp (Sallyport): install as
# /usr/share/fish/vendor_completions.d/sp.fish (make install, the packages).
set -l commands mcp check init explain test audit approve oauth help version
complete -c sp -f
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a mcp -d 'serve MCP over stdin/stdout'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a check -d 'validate a policy and print a summary'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a init -d 'write a starting policy'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a explain -d 'what the policy decides for one call'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a test -d 'hold a file of calls to the decisions expected'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a audit -d 'check, print or export an audit journal'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a approve -d 'list or revoke approval grants'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a oauth -d 'sign in to a url upstream that needs OAuth'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a help -d 'print usage'
complete -c sp -n "not __fish_seen_subcommand_from $commands" -a version -d 'print the version'
complete -c sp -s c -l config -r -F -d 'policy file'
complete -c sp -s v -l verbose -d 'more log output on stderr'
complete -c sp -s q -l quiet -d 'no log output on stderr'
complete -c sp -s h -l help -d 'usage'
complete -c sp -s V -l version -d 'version'
complete -c sp -n '__fish_seen_subcommand_from mcp' -l max-line-bytes -x -d 'longest accepted request line'
complete -c sp -n '__fish_seen_subcommand_from mcp' -l close-on-refusal -d 'end the session after any refused request'
complete -c sp -n '__fish_seen_subcommand_from check' -l probe -d 'start and list each upstream'
complete -c sp -n '__fish_seen_subcommand_from init' -F
complete -c sp -n '__fish_seen_subcommand_from explain' -l tool -x -d 'the tool called'
complete -c sp -n '__fish_seen_subcommand_from explain' -l args -x -d 'its arguments (JSON)'
complete -c sp -n '__fish_seen_subcommand_from explain' -l json -d 'one JSON object'
complete -c sp -n '__fish_seen_subcommand_from test' -F
complete -c sp -n '__fish_seen_subcommand_from audit; and not __fish_seen_subcommand_from verify tail show export' -a 'verify tail show export'
complete -c sp -n '__fish_seen_subcommand_from verify tail show export' -F
complete -c sp -n '__fish_seen_subcommand_from verify' -l anchor -x -d 'a row hash the chain must hold'
complete -c sp -n '__fish_seen_subcommand_from tail' -s n -x -d 'rows'
complete -c sp -n '__fish_seen_subcommand_from tail show' -l json -d 'JSON lines'
complete -c sp -n '__fish_seen_subcommand_from export' -l format -x -a 'ndjson cef ocsf' -d 'export form'
complete -c sp -n '__fish_seen_subcommand_from export' -l since -x -d 'rows from TIME on (RFC 3339 or 30s, 15m, 1h, 7d)'
complete -c sp -n '__fish_seen_subcommand_from export' -l follow -d 'keep reading new rows'
complete -c sp -n '__fish_seen_subcommand_from approve; and not __fish_seen_subcommand_from list revoke' -a 'list revoke'
complete -c sp -n '__fish_seen_subcommand_from list' -l json -d 'JSON lines'
complete -c sp -n '__fish_seen_subcommand_from revoke' -l all -d 'every grant'
complete -c sp -n '__fish_seen_subcommand_from oauth; and not __fish_seen_subcommand_from login' -a 'login'
