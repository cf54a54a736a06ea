# bash completion for notifyutil (DarwinNotify)
_notifyutil() {
    local cur prev
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        -z) COMPREPLY=(); return ;;                      # milliseconds
        --bus) COMPREPLY=($(compgen -W "embedded session system unix:path=" -- "$cur")); return ;;
        -p|-w|-g|-s|-[0-9]*) COMPREPLY=(); return ;;     # a notification name
        -W|-W[0-9]*) COMPREPLY=(); return ;;             # a namespace
        -signal) COMPREPLY=($(compgen -W "1 2 10 12 15" -- "$cur")); return ;;
    esac
    COMPREPLY=($(compgen -W "-p -w -1 -g -s -W -q -v -z -M -R -port -file -check -plain -signal -dispatch \
        --bus --bus-status --bus-start --bus-stop --monitor --json --version -h --help" -- "$cur"))
}
complete -F _notifyutil notifyutil
