from tidings.cli import main

raise SystemExit(main())
