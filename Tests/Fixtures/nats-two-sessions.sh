#!/bin/bash
# NATS two-session loss: a reproduction with mosquitto's own clients and no DarwinNotify code
# (docs/BRIDGE.md, "NATS 2.9"). A 3-node nats-server cluster (MQTT + JetStream, ack_wait 2 s);
# persistent QoS 1 sessions read w/# (B on node 1, and with `2` a second one, A, on node 0); N
# messages are published QoS 1 to w/q on node 0; once B has a sixth of them, node 1 is killed
# (SIGKILL) and B's session resumes on node 2. Prints what B got, what it never got, and whether
# the cluster refused B's subscription on node 2.
#
#   bash Tests/Fixtures/nats-two-sessions.sh 1|2 [N]
#
# Needs nats-server, mosquitto_sub, mosquitto_pub and python3 (for free ports). Stops every
# process it starts and removes its directory.
set -u
sessions=${1:?1 or 2 sessions}; N=${2:-3000}
dir=$(mktemp -d /tmp/nats-two-sessions.XXXXXX)
pids=()
cleanup() { kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -a mqtt route node
for i in 0 1 2; do mqtt[$i]=$(port); route[$i]=$(port); client[$i]=$(port); done
routes="nats://127.0.0.1:${route[0]}, nats://127.0.0.1:${route[1]}, nats://127.0.0.1:${route[2]}"
for i in 0 1 2; do
    cat > "$dir/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:${client[$i]}
jetstream { store_dir: "$dir/js$i" }
cluster { name: repro, listen: 127.0.0.1:${route[$i]}, routes: [$routes] }
mqtt { listen: 127.0.0.1:${mqtt[$i]}, ack_wait: "2s" }
CONF
    nats-server -c "$dir/n$i.conf" > "$dir/n$i.log" 2>&1 & node[$i]=$!; pids+=($!)
done
for _ in $(seq 150); do grep -q "metadata leader" "$dir"/n*.log && break; sleep 0.2; done

# A persistent session (-c) reading w/# at QoS 1, line-buffered into $3; retried until the
# cluster takes the connection.
subscribe() {
    local pid
    for _ in $(seq 50); do
        stdbuf -oL mosquitto_sub -h 127.0.0.1 -p "$1" -c -i "$2" -q 1 -t 'w/#' >> "$3" 2>> "$3.err" & pid=$!
        sleep 0.5
        if kill -0 "$pid" 2>/dev/null; then pids+=("$pid"); echo "$pid"; return; fi
    done
}
[ "$sessions" = 2 ] && subscribe "${mqtt[0]}" sessionA "$dir/A" > /dev/null
b1=$(subscribe "${mqtt[1]}" sessionB "$dir/B1"); pids+=("$b1") # started in a subshell: its pid is kept here
# Both sessions read: one message reached each.
for _ in $(seq 100); do
    mosquitto_pub -h 127.0.0.1 -p "${mqtt[0]}" -q 1 -t w/q -m 0
    sleep 0.3
    grep -qx 0 "$dir/B1" && { [ "$sessions" = 1 ] || grep -qx 0 "$dir/A"; } && break
done
seq 1 "$N" | mosquitto_pub -h 127.0.0.1 -p "${mqtt[0]}" -q 1 -t w/q -l -i publisher & publisher=$!; pids+=($publisher)
for _ in $(seq 1000); do [ "$(grep -c . "$dir/B1")" -ge $((N / 6)) ] && break; sleep 0.02; done
kill -9 "${node[1]}"; kill "$b1"
subscribe "${mqtt[2]}" sessionB "$dir/B2" > /dev/null
wait "$publisher"
# Late redeliveries come after ack_wait; wait for all, at most 40 s.
for _ in $(seq 40); do
    [ "$(cat "$dir/B1" "$dir/B2" 2>/dev/null | sort -un | grep -c .)" -gt "$N" ] && break
    sleep 1
done
sleep 3
missing=$(comm -23 <(seq 0 "$N" | sort) <(cat "$dir/B1" "$dir/B2" 2>/dev/null | sort -u) | sort -n)
echo "sessions=$sessions published=$((N + 1)) B-distinct=$(cat "$dir/B1" "$dir/B2" 2>/dev/null | sort -u | grep -c .)" \
     "B-lines=$(cat "$dir/B1" "$dir/B2" 2>/dev/null | wc -l) never=$(echo "$missing" | grep -c .)" \
     "first-never=[$(echo $missing | cut -c1-80)] refused=$(grep -c denied "$dir/B2.err" 2>/dev/null)"
