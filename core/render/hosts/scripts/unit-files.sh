# shellcheck shell=bash
# Removing a rank's unit: the unit file, its environment file, its rollback state and the last load's
# time its progress lines keep.
# Reads: state_dir.
# shellcheck disable=SC2154

# Args: unit name, unit file, env file. The unit is stopped and disabled by the caller.
remove_unit_files() {
  rm -f "$2" "$3" "$state_dir/$1.previous" "$state_dir/$1.previous-env" "$state_dir/$1.pending" "$state_dir/$1.load-seconds"
  systemctl daemon-reload
}
