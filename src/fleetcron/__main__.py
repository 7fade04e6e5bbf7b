from fleetcron.cli.main import main

main()
