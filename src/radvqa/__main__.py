from radvqa.cli import main

main()
