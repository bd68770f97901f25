# bash completion for sp (Sallyport): install as
# /usr/share/bash-completion/completions/sp (make install, the packages).
_sp() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    case $prev in
        -c | --config) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --max-line-bytes | -n | --anchor | --tool | --args) return ;;
    esac
    local i command= sub=
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            -c | --config | --max-line-bytes | -n | --anchor | --tool | --args | --format | --since) ((i++)) ;;
            -*) ;;
            *) if [[ -z $command ]]; then command=${words[i]}; elif [[ -z $sub ]]; then sub=${words[i]}; fi ;;
        esac
    done
    case $command in
        '') COMPREPLY=($(compgen -W 'mcp check init explain test audit approve oauth help version --config --verbose --quiet --help --version' -- "$cur")) ;;
        mcp) COMPREPLY=($(compgen -W '--config --max-line-bytes --close-on-refusal --verbose --quiet --help' -- "$cur")) ;;
        check) COMPREPLY=($(compgen -W '--config --probe --verbose --quiet --help' -- "$cur")) ;;
        explain) COMPREPLY=($(compgen -W '--config --tool --args --json --help' -- "$cur")) ;;
        test) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur") $(compgen -W '--config --help' -- "$cur")) ;;
        init) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur") $(compgen -W '- --help' -- "$cur")) ;;
        audit)
            case $sub in
                '') COMPREPLY=($(compgen -W 'verify tail show export --help' -- "$cur")) ;;
                verify) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur") $(compgen -W '--anchor' -- "$cur")) ;;
                tail) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur") $(compgen -W '-n --json' -- "$cur")) ;;
                show) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur") $(compgen -W '--json' -- "$cur")) ;;
                export)
                    case $prev in
                        --format) COMPREPLY=($(compgen -W 'ndjson cef ocsf' -- "$cur")) ;;
                        --since) COMPREPLY=() ;;
                        *) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur") $(compgen -W '--format --since --follow' -- "$cur")) ;;
                    esac ;;
            esac ;;
        approve)
            case $sub in
                '') COMPREPLY=($(compgen -W 'list revoke --config --help' -- "$cur")) ;;
                list) COMPREPLY=($(compgen -W '--json --config' -- "$cur")) ;;
                revoke) COMPREPLY=($(compgen -W '--all --config' -- "$cur")) ;;
            esac ;;
        oauth)
            case $sub in
                '') COMPREPLY=($(compgen -W 'login --config --help' -- "$cur")) ;;
                login) COMPREPLY=($(compgen -W '--config' -- "$cur")) ;;
            esac ;;
    esac
}
complete -F _sp sp
