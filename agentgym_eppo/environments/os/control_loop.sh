# shellcheck shell=bash
# The bubblewrap sandbox's control loop (sandbox_bwrap.py), run on the host as
#   bash --noprofile --norc -c "<assignments><this file>" control <file size limit, KiB> <pid>
# where <pid> keeps the sandbox's user namespace until the holder is in it, and the
# assignments set ROOT, SCRATCH and SECCOMP and the bwrap argument arrays HOLDER, AGENT,
# JUDGE, PROTECT, BASE_DIRS, BASE_USR, USR_DIRS, USR_NAMES, USR_LINKS and BASE_LINKS.
# Fd 0/1 are pipes to Python (one request a line; each answer a line
# "<id> <exit code> <size>" and <size> bytes of output), fd 3 the agent's terminal.
exec 2>/dev/null
LC_ALL=C
unset OLDPWD  # the launcher's host directory, else visible in /proc/1/environ
ulimit -f "$1"
userns=$2  # a process that keeps the sandbox's user namespace until the holder is in it
# shellcheck disable=SC2153  # HOLDER is one of the assignments, not a misspelt holder
exec 5< <(exec nsenter -t "$userns" --user -- "${HOLDER[@]}" --info-fd 6 -- sleep infinity 6>&1 >/dev/null </dev/null 3>&-)
holder=
while IFS= read -r -u 5 info; do
    if [[ $info =~ \"child-pid\":\ *([0-9]+) ]]; then holder=${BASH_REMATCH[1]}; break; fi
done  # fd 5 stays open: bwrap gets SIGPIPE if it writes to a closed pipe
kill -9 "$userns"  # the holder keeps the namespace now (it dies with this loop; that does not)
[ -n "$holder" ] || exit 1
# the exit nonce comes with the shell request and reaches the wrapper on a pipe (fd 8) that
# it closes before the agent's shell starts: on no command line, in no environment, and the
# shell starts at once (a reserve sandbox's shell is up before its episode begins)
# shellcheck disable=SC2016  # expanded by the shell that runs it, not here
WRAP='IFS= read -r n <&8; exec 8<&-; bash --login --noediting -i; printf "\036%s\036exit\036\n" "$n"'
judge_view() {  # the agent's processes are stopped meanwhile: nothing moves under it
    VIEW=(--bind "$ROOT" / "${BASE_DIRS[@]}")
    local i name target whole=
    # the agent's /usr under every directory of the base's /usr (local too: a .pth file
    # or sitecustomize in local/lib would run in a python check), so only what the base
    # lacks shows through (/usr/stock.log, say); the base's whole /usr where the agent
    # replaced one of those directories
    for name in "${USR_NAMES[@]}"; do
        if [ -L "$ROOT/usr/$name" ] || ! [ -d "$ROOT/usr/$name" ]; then whole=1; fi
    done
    for ((i = 0; i < ${#USR_LINKS[@]}; i += 2)); do  # the base's links in /usr, unchanged
        name=${USR_LINKS[i]}; target=${USR_LINKS[i + 1]}
        if ! [ -L "$ROOT/usr/$name" ] || [ "$(readlink "$ROOT/usr/$name")" != "$target" ]; then
            whole=1
        fi
    done
    if [ -L "$ROOT/usr" ] || ! [ -d "$ROOT/usr" ]; then whole=1; fi
    if [ -n "$whole" ]; then VIEW+=("${BASE_USR[@]}"); else VIEW+=("${USR_DIRS[@]}"); fi
    for ((i = 0; i < ${#BASE_LINKS[@]}; i += 2)); do
        name=${BASE_LINKS[i]}; target=${BASE_LINKS[i + 1]}
        # the base's link, or bwrap fails to make it and the check fails: the agent broke it
        if ! [ -L "$ROOT/$name" ] || [ "$(readlink "$ROOT/$name")" != "$target" ]; then
            VIEW+=(--symlink "$target" "/$name")
        fi
    done
    for name in usr/local/bin usr/local/sbin; do  # no symlink on the way: it would resolve on the host
        if [ -d "$ROOT/$name" ] && ! [ -L "$ROOT/usr" ] && ! [ -L "$ROOT/usr/local" ] && ! [ -L "$ROOT/$name" ]; then
            VIEW+=(--bind "$ROOT/$name" "/$name")
        fi
    done
}
while IFS= read -r line; do
    eval "words=($line)"  # the request's words, each quoted by Python as $'...'
    # shellcheck disable=SC2154  # words is assigned by the eval above
    id=${words[0]}; request=${words[1]}
    case $request in
    shell)
        # what was typed to a shell that had died (a command sent before its death was
        # seen) is still queued on the terminal: the new shell would read it first
        # (read -t 0 only asks whether input waits: a first start does not wait at all)
        while read -r -t 0 -u 3 && read -r -t 0.05 -u 3 _; do :; done
        # shellcheck disable=SC2016  # $0 and $1 expand in the bash -c below, inside the sandbox
        nsenter -t "$holder" --user --net --ipc --uts -- "${AGENT[@]}" -- \
            bash -c 'exec 9<&-; exec setsid -c env --default-signal=INT,QUIT bash -c "$1" "$0"' \
            wrap "$WRAP" 8< <(printf '%s\n' "${words[2]}") 9<"/proc/$holder/ns/pid" 10<"$SECCOMP" \
            <&3 >&3 2>&3 3>&- 5<&- &
        printf '%s 0 0\n' "$id" ;;
    run)
        judge_view
        nsenter -t "$holder" --user --net --ipc --uts -- "${JUDGE[@]}" "${VIEW[@]}" "${PROTECT[@]}" -- \
            bash -c 'exec 9<&-; exec timeout -s KILL "$@"' judge "${words[2]}" "${words[@]:3}" \
            9<"/proc/$holder/ns/pid" 10<"$SECCOMP" </dev/null >"$SCRATCH" 2>&1 3>&- 5<&-
        rc=$?
        out=
        IFS= read -r -d '' -N 1048576 out <"$SCRATCH"
        : >"$SCRATCH"
        printf '%s %s %s\n%s' "$id" "$rc" "${#out}" "$out" ;;
    esac
done
