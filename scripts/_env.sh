# Sourced by the set-up and test scripts: makes sure they run inside a virtual
# environment. An active one (VIRTUAL_ENV set) is used as it is; otherwise the project's
# own .venv is created on first use (with python3, or $PYTHON) and activated.
if [ -z "${VIRTUAL_ENV:-}" ]; then
    if [ ! -x .venv/bin/python ]; then
        echo "== creating .venv"
        "${PYTHON:-python3}" -m venv .venv
    fi
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
