"""`python -m ascendbridge.teamlead` (what ./run_auto_team_lead.sh runs)."""

import sys

from ascendbridge.teamlead.cli import main

sys.exit(main())
