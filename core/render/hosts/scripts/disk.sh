# shellcheck shell=bash
# Free disk where the weights, the compile cache and offload files grow.
# shellcheck disable=SC2154,SC2034

# Sets free_under ($1, or its nearest existing parent before the install creates it) and free_gb
# (GiB available there, as df counts for an unprivileged writer).
free_space() {
  free_under=$1
  while [ ! -d "$free_under" ]; do free_under=$(dirname "$free_under"); done
  free_gb=$(( $(df -Pk "$free_under" | awk 'NR == 2 {print $4}') / 1048576 ))
}
