# Sourced by the generate*.sh scripts here: copies Kueue's module (the
# version in $version) from the module proxy into a scratch directory,
# $scratch, removed when the script exits. Nothing of Kueue is built into
# Strata; Strata's generators run inside the copy.
GOFLAGS=-mod=mod go mod download "sigs.k8s.io/kueue@${version}"
src="$(go env GOMODCACHE)/sigs.k8s.io/kueue@${version}"
scratch=$(mktemp -d)
trap 'chmod -R u+w "$scratch"; rm -rf "$scratch"' EXIT
cp -r "$src/." "$scratch/"
chmod -R u+w "$scratch"
