from playa.cli import main

raise SystemExit(main())
