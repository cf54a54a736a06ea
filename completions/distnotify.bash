# bash completion for distnotify (DarwinNotify)
_distnotify() {
    local cur prev
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        --bus) COMPREPLY=($(compgen -W "embedded session system unix:path=" -- "$cur")); return ;;
        --object|-u|--user-info|--count) COMPREPLY=(); return ;;
    esac
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "post watch --help --version" -- "$cur")); return
    fi
    case "${COMP_WORDS[1]}" in
        post) COMPREPLY=($(compgen -W "--object --user-info -u --deliver-immediately --bus --system" -- "$cur")) ;;
        watch) COMPREPLY=($(compgen -W "--object --json --count --bus --system" -- "$cur")) ;;
    esac
}
complete -F _distnotify distnotify
