# shellcheck shell=bash
# A compile key's files in the compiled cache that every key of the host shares (cache_dir,
# VLLM_CACHE_ROOT/rbln), whatever brought them: a compile-only run in a folder of its own, or an
# artifact pulled and unpacked in scratch. Both arrive in a folder of their own first, are listed
# and checked there, and are placed the same way: only files the cache lacks are added (hard links,
# so a file appears whole or not at all), a file already there with the same bytes is shared, and
# one with other bytes (another key's bundle) is refused before anything is placed. Folders the
# cache has keep their owner and mode; new ones are the service user's, 0750, files 0640.
# Names are checked where they are read: a name a list cannot carry (a newline) or outside the
# cache is refused, never mangled.
# Reads: cache_dir, files_list, marker, service_user (empty: owners stay as they are, as in a pod),
# and fail (compile-flow.sh).
# shellcheck disable=SC2154

# The one program that reads names: lists the files of folder $2 (mode "dir") or checks and unpacks
# the tar $2 into folder $3 (mode "tar"), writing the relative names, sorted, one per line, to the
# last argument. A tar must hold only folders and plain files (no links, devices or sparse files),
# each name made of letters, digits and ._@+=,:%~- under the folder, each once, their sizes within
# the tar's own size and the free space under the cache. Exit 3 with one line on stderr: refused.
cache_files_py() {
  python3 - "$@" <<'PY'
import os, re, sys, tarfile

NAME = re.compile(r"[A-Za-z0-9._@+=,:%~-]+")
MAX_FILES = 100000


def refuse(why):
    print(why, file=sys.stderr)
    sys.exit(3)


def check(name):
    parts = name.split("/")
    if len(name) > 4000 or not all(NAME.fullmatch(p) and p not in (".", "..") and len(p) <= 255 for p in parts):
        refuse(f"holds a name the cache does not take ({name!r}): only letters, digits and ._@+=,:%~- under the cache")
    return name


def list_dir(root, out):
    names = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for f in files:
            path = os.path.join(top, f)
            if os.path.isfile(path) and not os.path.islink(path) and not f.endswith(".tmp"):
                names.append(check(os.path.relpath(path, root)))
    write(names, out)


def unpack(layer, dest, free_dir, out):
    size = os.path.getsize(layer)
    seen, total = set(), 0
    with tarfile.open(layer, "r:") as tar:
        members = []
        for m in tar:
            members.append(m)
            if len(members) > MAX_FILES:
                refuse(f"holds more than {MAX_FILES} entries")
            name = check(m.name.rstrip("/"))
            if not (m.isreg() or m.isdir()) or m.issparse():
                refuse(f"holds links, devices, sparse files or paths outside the cache ({name!r})")
            if name in seen:
                refuse(f"holds {name!r} twice")
            seen.add(name)
            total += m.size if m.isreg() else 0
        files = [m for m in members if m.isreg()]
        file_names = {m.name for m in files}
        for m in members:
            parts = m.name.rstrip("/").split("/")
            if any("/".join(parts[:i]) in file_names for i in range(1, len(parts))):
                refuse(f"holds {m.name!r} under a file")
        if total > size:
            refuse(f"says its files hold {total} bytes, more than the {size} bytes it has")
        st = os.statvfs(free_dir)
        if total > st.f_bavail * st.f_frsize:
            refuse(f"needs {total >> 20} MiB, more than the {(st.f_bavail * st.f_frsize) >> 20} MiB free under the cache")
        for m in files:
            path = os.path.join(dest, m.name)
            os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
            source = tar.extractfile(m)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640)
            with os.fdopen(fd, "wb") as target:
                left = m.size
                while left:
                    chunk = source.read(min(left, 1 << 20))
                    if not chunk:
                        refuse(f"ends inside {m.name!r}")
                    target.write(chunk)
                    left -= len(chunk)
    write([m.name for m in files], out)


def write(names, out):
    with open(out, "w") as f:
        f.writelines(n + "\n" for n in sorted(names))


try:
    if sys.argv[1] == "dir":
        list_dir(sys.argv[2], sys.argv[3])
    else:
        unpack(*sys.argv[2:6])
except (tarfile.TarError, OSError, UnicodeError) as error:
    refuse(f"cannot be read as a tar of the cache ({error})")
PY
}

# Which other key's list names the file $1, for the refusal's line.
cache_file_owner() {
  local list
  for list in "$(dirname "$marker")"/compile-*.files; do
    [ -f "$list" ] && [ "$list" != "$files_list" ] && grep -qxF -- "$1" "$list" && { basename "$list" .files | sed 's/^compile-/ (key /; s/$/)/'; return 0; }
  done
  return 0
}

# Places the files named in list $2 (relative to folder $1) into cache_dir and makes $2 the key's
# files list. Checks every one first: a refusal changes nothing.
place_files() {
  local from=$1 list=$2 rel dest
  [ -d "$cache_dir" ] || install -d ${service_user:+-o "$service_user" -g "$service_user"} -m 0750 "$cache_dir"
  while IFS= read -r rel; do
    dest="$cache_dir/$rel"
    real_folders "$(dirname "$rel")" || fail "$(dirname "$rel") is not a folder in ${cache_dir}; refused, nothing changed"
    if [ -e "$dest" ] || [ -L "$dest" ]; then
      { [ -f "$dest" ] && [ ! -L "$dest" ] && cmp -s "$from/$rel" "$dest"; } ||
        fail "${rel} is in ${cache_dir} already with other content$(cache_file_owner "$rel"); a key's files never replace another's; refused, nothing changed"
    fi
  done < "$list"
  while IFS= read -r rel; do
    dest="$cache_dir/$rel"
    [ -e "$dest" ] && continue
    make_cache_dirs "$(dirname "$rel")"
    chmod 0640 "$from/$rel"
    [ -z "$service_user" ] || chown "$service_user:$service_user" "$from/$rel"
    ln "$from/$rel" "$dest" 2>/dev/null || { cp -p "$from/$rel" "$dest.rbln-serving.$$" && ln "$dest.rbln-serving.$$" "$dest" && rm -f "$dest.rbln-serving.$$"; } ||
      fail "placing ${rel} in ${cache_dir} failed"
  done < "$list"
  mkdir -p "$(dirname "$files_list")"
  cp "$list" "$files_list.tmp"
  mv "$files_list.tmp" "$files_list"
}

# 0 when every folder on the way from cache_dir to relative path $1 that exists is a folder, not a link.
real_folders() {
  local path=$cache_dir part IFS=/
  for part in $1; do
    path="$path/$part"
    [ -e "$path" ] || [ -L "$path" ] || return 0
    [ -d "$path" ] && [ ! -L "$path" ] || return 1
  done
}

# Creates the folders of relative path $1 under cache_dir that are missing; existing ones are left as they are.
make_cache_dirs() {
  [ "$1" = . ] && return 0
  [ -d "$cache_dir/$1" ] && return 0
  make_cache_dirs "$(dirname "$1")"
  mkdir -m 0750 "$cache_dir/$1"
  [ -z "$service_user" ] || chown "$service_user:$service_user" "$cache_dir/$1"
}
