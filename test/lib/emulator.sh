# Sourced by the suites' run.sh (bash): starts a cfp emulator and waits until it serves.
#
# start_emulator CFP DIR ADDR [FLAG...] starts "CFP emulator --data DIR/data --addr ADDR FLAG...
# -o json" in the background, with its serving line in DIR/serving.json and its log in
# DIR/emulator.log, and returns once DIR/serving.json is written, its pid in emulator_pid.
# It exits the script, with the emulator's log, if the emulator dies or has not started
# within 10 s.
start_emulator() {
  local cfp=$1 dir=$2 addr=$3
  shift 3
  mkdir -p "$dir"
  "$cfp" emulator --data "$dir/data" --addr "$addr" "$@" -o json >"$dir/serving.json" 2>"$dir/emulator.log" &
  emulator_pid=$!
  for _ in $(seq 100); do
    [ -s "$dir/serving.json" ] && return 0
    kill -0 "$emulator_pid" 2>/dev/null || { cat "$dir/emulator.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "$(basename "$(dirname "${BASH_SOURCE[1]}")"): cfp emulator did not start on $addr" >&2
  cat "$dir/emulator.log" >&2
  exit 1
}
