import QueuekitCLI

// Everything but this line lives in the QueuekitCLI library (the fuzz targets link it).
await QueuekitTool.main()
