# Sourced by scripts/test.sh: names each step of the suite and prints, when the
# suite ends (passed or failed), the wall time each step took, so that a slow
# step shows at the end of every CI log.
#
#   section NAME      ends the running section and starts NAME ("== NAME")
#   sections_report   ends the running section and prints the table
#
# A failing suite prints the table from its EXIT trap, with the failed
# section last.

_section_name=""
_section_start=0
_section_rows=()

section_end() {
	if [[ -n $_section_name ]]; then
		_section_rows+=("$((SECONDS - _section_start))|$_section_name")
		_section_name=""
	fi
}

section() {
	section_end
	_section_name=$1
	_section_start=$SECONDS
	echo "== $1"
}

sections_report() {
	local row
	section_end
	echo "== wall time per section (seconds)"
	for row in "${_section_rows[@]}"; do
		printf '%6s  %s\n' "${row%%|*}" "${row#*|}"
	done
}
