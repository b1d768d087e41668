from fleet_tui.cli import main

raise SystemExit(main())
