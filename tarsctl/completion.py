"""tarsctl completion: the bash and zsh completion scripts, written by hand from the parser in
tarsctl/cli.py (tests/client/test_config_view.py checks that they name every command and option).
Loaded only by the completion command."""

BASH_COMPLETION = """\
_tarsctl() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local commands="chat search links backlinks related remember forget review rules routines remind inbox index status
        tools ping stop completion doctor service config mcp http memory"
    case "$prev" in
        --mode) COMPREPLY=($(compgen -W "hybrid fts vec" -- "$cur")); return ;;
        --provider) COMPREPLY=($(compgen -W "ollama anthropic" -- "$cur")); return ;;
        --type) COMPREPLY=($(compgen -W "semantic procedural episodic note" -- "$cur")); return ;;
        completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return ;;
        service) COMPREPLY=($(compgen -W "install status uninstall logs" -- "$cur")); return ;;
        config) COMPREPLY=($(compgen -W "path show" -- "$cur")); return ;;
        http) COMPREPLY=($(compgen -W "token url" -- "$cur")); return ;;
        routines) COMPREPLY=($(compgen -W "list show add edit pause resume rm run" -- "$cur")); return ;;
        memory) COMPREPLY=($(compgen -W "review proposals approve reject undo schedule" -- "$cur")); return ;;
        --kind) COMPREPLY=($(compgen -W "duplicate supersede expired budget missing" -- "$cur")); return ;;
        --to|--deliver) COMPREPLY=($(compgen -W "inbox telegram whatsapp note" -- "$cur")); return ;;
        index) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version --socket" -- "$cur"))
    elif [[ "$cur" == -* ]]; then
        case "${COMP_WORDS[1]}" in
            search) COMPREPLY=($(compgen -W "--mode --limit --min-score --type --path --all-chunks
                --tag --since --before --explain --json" -- "$cur")) ;;
            links) COMPREPLY=($(compgen -W "--unresolved --json" -- "$cur")) ;;
            backlinks) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
            related) COMPREPLY=($(compgen -W "--limit --json" -- "$cur")) ;;
            index) COMPREPLY=($(compgen -W "--full --wait --json" -- "$cur")) ;;
            status) COMPREPLY=($(compgen -W "--json --files" -- "$cur")) ;;
            tools) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
            ping) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
            chat) COMPREPLY=($(compgen -W "--conversation --provider --model --repl --json --explain --allow-tools" -- "$cur")) ;;
            remember) COMPREPLY=($(compgen -W "--procedural --section --replace --force" -- "$cur")) ;;
            forget) COMPREPLY=($(compgen -W "--procedural --yes --limit" -- "$cur")) ;;
            routines) COMPREPLY=($(compgen -W "--json --schedule --prompt --deliver --tools --quiet --no-quiet --runs-per-day
                --tokens-per-run --grace --note --heading" -- "$cur")) ;;
            remind) COMPREPLY=($(compgen -W "--to --json" -- "$cur")) ;;
            inbox) COMPREPLY=($(compgen -W "--all --limit --keep-unread --json" -- "$cur")) ;;
            memory) COMPREPLY=($(compgen -W "--kind --no-sessions --provider --model --deliver --json" -- "$cur")) ;;
            http) COMPREPLY=($(compgen -W "--rotate" -- "$cur")) ;;
            doctor) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
        esac
    fi
}
complete -o default -F _tarsctl tarsctl
"""

ZSH_COMPLETION = """\
#compdef tarsctl
_tarsctl() {
    local -a commands
    commands=(chat:'chat with tars' search:'search the vault' links:'the links in a note' backlinks:'the notes linking to a note'
              related:'the notes nearest in meaning' remember:'save a fact' forget:'remove a fact' review:'review feedback'
              rules:'approve rules the model proposed' routines:'routines and reminders'
              remind:'a reminder at a time' inbox:'what routines and reminders said'
              index:'index the vault or paths' status:'daemon status'
              tools:'the MCP servers whose tools the chat may call'
              ping:'check the daemon answers' stop:'stop the daemon'
              completion:'print a completion script' doctor:'check the setup' service:'run tarsd always'
              config:'show the configuration' mcp:'serve tars to AI tools over MCP (stdio)'
              http:'the HTTP token and the web page address'
              memory:'the memory review: proposals, approve, reject, undo')
    if (( CURRENT == 2 )); then _describe command commands; return; fi
    case $words[2] in
        search) _arguments '--mode[search mode]:mode:(hybrid fts vec)' '--limit[results]:n' '--min-score[0..1]:score' \\
                  '*--type[memory type]:type:(semantic procedural episodic note)' '--path[path prefix]:prefix' \\
                  '--all-chunks' '*--tag[tag]:tag' '--since[modified since]:when' '--before[modified before]:when' \\
                  '--explain' '--json' '*:query' ;;
        links) _arguments '--unresolved' '--json' '1:note:_files' ;;
        backlinks) _arguments '--json' '1:note:_files' ;;
        related) _arguments '--limit[notes]:n' '--json' '1:note:_files' ;;
        index) _arguments '--full' '--wait' '--json' '*:path:_files' ;;
        status) _arguments '--json' '--files' ;;
        tools) _arguments '--json' ;;
        ping) _arguments '--json' ;;
        chat) _arguments '--conversation[id]:id' '--provider[provider]:provider:(ollama anthropic)' '--model[model]:model' \\
                '--repl' '--json' '--explain[say what the opening context spent]' \\
                '*--allow-tools[tools allowed without asking]:names' '*:message' ;;
        remember) _arguments '--procedural' '--section[heading]:heading' '(--force)--replace' '(--replace)--force' '*:fact' ;;
        forget) _arguments '--procedural' '--yes' '--limit[lines shown]:n' '*:text' ;;
        routines) _arguments '--json' '1:action:(list show add edit pause resume rm run)' '2:name' \\
                    '--schedule[cron, every 2h, or a date and time]:schedule' '--prompt[what tars is asked; - reads stdin]:prompt' \\
                    '*--deliver[where its answer goes]:target:(inbox telegram whatsapp note)' '*--tools[tools without asking]:names' \\
                    '(--no-quiet)--quiet' '(--quiet)--no-quiet' '--runs-per-day[runs a day]:n' '--tokens-per-run[tokens a run]:n' \\
                    '--grace[minutes late a run may start]:minutes' '--note[the note target]:path' '--heading[its heading]:heading' ;;
        remind) _arguments '*--to[where it goes]:channel:(inbox telegram whatsapp)' '--json' '1:when' '*:text' ;;
        inbox) _arguments '--all' '(-n --limit)'{-n,--limit}'[messages]:n' '--keep-unread' '--json' ;;
        memory) _arguments '1:action:(review proposals approve reject undo schedule)' '*:number' \\
                  '--kind[all waiting of a kind]:kind:(duplicate supersede expired budget missing)' '--no-sessions' \\
                  '--provider[provider]:provider:(ollama anthropic)' '--model[model]:model' \\
                  '*--deliver[where it says what it found]:target:(inbox telegram whatsapp note)' '--json' ;;
        completion) _arguments '1:shell:(bash zsh)' ;;
        service) _arguments '1:action:(install status uninstall logs)' ;;
        config) _arguments '1:action:(path show)' ;;
        http) _arguments '1:action:(token url)' '--rotate[token: make a new one]' ;;
        doctor) _arguments '--json' ;;
    esac
}
compdef _tarsctl tarsctl
"""
