# fish completion for distnotify (DarwinNotify)
complete -c distnotify -f
complete -c distnotify -n '__fish_use_subcommand' -a post -d 'post one distributed notification'
complete -c distnotify -n '__fish_use_subcommand' -a watch -d 'print distributed notifications as they arrive'
complete -c distnotify -l object -r -d 'the object (post) or only this object (watch)'
complete -c distnotify -n '__fish_seen_subcommand_from post' -s u -l user-info -r -d 'the userInfo, a JSON object'
complete -c distnotify -n '__fish_seen_subcommand_from post' -l deliver-immediately -d 'delivered at once, even to suspended observers'
complete -c distnotify -n '__fish_seen_subcommand_from watch' -l json -d 'one JSON object per line'
complete -c distnotify -n '__fish_seen_subcommand_from watch' -l count -r -d 'exit after N'
complete -c distnotify -l bus -r -a 'embedded session system' -d 'the bus'
complete -c distnotify -l system -d "every user's bus: the system bus"
complete -c distnotify -l help -d 'usage'
complete -c distnotify -l version -d 'the version'
