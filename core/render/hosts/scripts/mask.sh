# shellcheck shell=bash
# What a step prints of a log: credentials in a URL masked (an extraEnv proxy's password, say), up
# to the last @ of the authority, as core/errors.ts's maskUrlCredentials masks them.
mask_url_credentials() { sed -E 's#(://)[^/?\#[:space:]"'"'"']*@#\1***@#g'; }
